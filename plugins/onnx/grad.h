/*
 * grad.h — the gradient rules (and the training-mode forwards) that live
 * outside rules.c, by kind. Each follows autodiff.h's ad_fwd_fn / ad_bwd_fn
 * contract.
 */
#ifndef BB_ONNX_GRAD_H
#define BB_ONNX_GRAD_H

#include "autodiff.h"

/* grad_linear.c */
int ad_bwd_gemm(ad_ctx *c);
int ad_bwd_matmul(ad_ctx *c);

/* grad_conv.c */
int ad_bwd_conv(ad_ctx *c);
int ad_fwd_maxpool_train(ad_ctx *c, bb_value *const *in, bb_value **out);
int ad_bwd_maxpool(ad_ctx *c);
int ad_bwd_avgpool(ad_ctx *c);
int ad_bwd_global_avgpool(ad_ctx *c);

/* grad_norm.c */
int ad_prepare_batchnorm(ad_plan *p, ad_node *n, const char *who, bb_error *err);
int ad_fwd_batchnorm_train(ad_ctx *c, bb_value *const *in, bb_value **out);
int ad_fwd_batchnorm_infer(ad_ctx *c, bb_value *const *in, bb_value **out);
int ad_bwd_batchnorm(ad_ctx *c);
int ad_fwd_layernorm_train(ad_ctx *c, bb_value *const *in, bb_value **out);
int ad_bwd_layernorm(ad_ctx *c);
int ad_bwd_softmax(ad_ctx *c);

/* grad_shape.c */
int ad_prepare_transpose(ad_plan *p, ad_node *n, const char *who, bb_error *err);
int ad_bwd_transpose(ad_ctx *c);
int ad_bwd_concat(ad_ctx *c);
int ad_bwd_split(ad_ctx *c);
int ad_bwd_slice(ad_ctx *c);
int ad_bwd_gather(ad_ctx *c);
int ad_bwd_reduce(ad_ctx *c);

#endif
