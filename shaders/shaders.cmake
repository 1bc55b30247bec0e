# Every pipeline variant the engine embeds: file, variant name, defines.
kvscope_shader(convert.comp NAME convert_f32_to_f16 DEFINES TO_F16)
kvscope_shader(convert.comp NAME convert_f16_to_f32 DEFINES TO_F32)
kvscope_shader(rmsnorm.comp)
kvscope_shader(softmax.comp)
kvscope_shader(rope.comp)
kvscope_shader(activation.comp)
kvscope_shader(moe_route.comp)
kvscope_shader(moe_sum.comp)
kvscope_shader(moe_group.comp)
# Weight kernels (engine/gpu/weight_kernels.cpp): every GGUF weight type in
# each launch shape: cpu (wide loads, no barriers), sg (subgroup reduction),
# smem (shared-memory reduction), gpu (shared-memory tiles); _experts: the
# products over a stack of experts: the matvec one routed (token, slot) pair
# per workgroup row, the matmul one expert per workgroup row over its pairs.
foreach(type F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 IQ4_NL MXFP4 Q4_K Q5_K Q6_K IQ4_XS)
  string(TOLOWER ${type} t)
  kvscope_shader(weight_matvec.comp NAME weight_matvec_${t}_cpu DEFINES TYPE_${type} WIDE_LOADS)
  kvscope_shader(weight_matvec.comp NAME weight_matvec_${t}_sg DEFINES TYPE_${type} SUBGROUP_REDUCE)
  kvscope_shader(weight_matvec.comp NAME weight_matvec_${t}_smem DEFINES TYPE_${type})
  kvscope_shader(weight_matvec.comp NAME weight_matvec_${t}_cpu_experts DEFINES TYPE_${type} WIDE_LOADS EXPERTS)
  kvscope_shader(weight_matvec.comp NAME weight_matvec_${t}_sg_experts DEFINES TYPE_${type} SUBGROUP_REDUCE EXPERTS)
  kvscope_shader(weight_matvec.comp NAME weight_matvec_${t}_smem_experts DEFINES TYPE_${type} EXPERTS)
  kvscope_shader(weight_matmul.comp NAME weight_matmul_${t}_cpu DEFINES TYPE_${type} WIDE_LOADS)
  kvscope_shader(weight_matmul.comp NAME weight_matmul_${t}_gpu DEFINES TYPE_${type})
  kvscope_shader(weight_matmul.comp NAME weight_matmul_${t}_cpu_experts DEFINES TYPE_${type} WIDE_LOADS EXPERTS)
  kvscope_shader(weight_matmul.comp NAME weight_matmul_${t}_gpu_experts DEFINES TYPE_${type} EXPERTS)
endforeach()
# Attention over the paged f16 KV cache (engine/gpu/attention_kernels.cpp): the
# GPU launch shape, the CPU-device one (_cpu), and the split reduction.
kvscope_shader(kv_write.comp)
kvscope_shader(attention.comp NAME attention_stats DEFINES PASS_STATS)
kvscope_shader(attention.comp NAME attention_out DEFINES PASS_OUT)
kvscope_shader(attention_cpu.comp NAME attention_stats_cpu DEFINES PASS_STATS)
kvscope_shader(attention_cpu.comp NAME attention_out_cpu DEFINES PASS_OUT)
kvscope_shader(attention_reduce.comp)
kvscope_shader(attention_reduce.comp NAME attention_reduce_gpu DEFINES SPLIT_LANES)
# The same over KV codecs other than f16 (shaders/kv_codec.glsl, one variant
# per shape and pass; the K and V codecs are specialization constants), the
# encoder of new rows and the rotation of rotated codecs.
kvscope_shader(attention.comp NAME attention_stats_codec DEFINES PASS_STATS CODEC)
kvscope_shader(attention.comp NAME attention_out_codec DEFINES PASS_OUT CODEC)
kvscope_shader(attention_cpu.comp NAME attention_stats_codec_cpu DEFINES PASS_STATS CODEC)
kvscope_shader(attention_cpu.comp NAME attention_out_codec_cpu DEFINES PASS_OUT CODEC)
kvscope_shader(kv_encode.comp)
kvscope_shader(kv_encode.comp NAME kv_encode_gpu DEFINES ROW_GROUPS)
kvscope_shader(kv_rotate.comp)
kvscope_shader(kv_rotate.comp NAME kv_rotate_gpu DEFINES SHARED_FWHT)
# The indexer (engine/gpu/attention_indexer.cpp): the sidecar, page scores,
# the selection and the gather of the selected rows.
kvscope_shader(kv_index.comp)
kvscope_shader(index_score.comp)
kvscope_shader(index_select.comp)
kvscope_shader(kv_gather.comp)
