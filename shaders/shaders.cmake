# Every pipeline variant the engine embeds: file, variant name, defines.
kvscope_shader(convert.comp NAME convert_f32_to_f16 DEFINES TO_F16)
kvscope_shader(convert.comp NAME convert_f16_to_f32 DEFINES TO_F32)
kvscope_shader(matvec.comp NAME matvec_f32 DEFINES WEIGHT_F32)
kvscope_shader(matvec.comp NAME matvec_f16 DEFINES WEIGHT_F16)
kvscope_shader(rmsnorm.comp)
kvscope_shader(softmax.comp)
kvscope_shader(silu_mul.comp)
