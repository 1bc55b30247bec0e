// Codec ids of the device KV cache (engine/gpu/kv_codec.h names them), shared
// by the C++ side and the GLSL decoders/encoders (kv_codec.glsl,
// kv_encode.comp), which take them as specialization constants. The byte
// layouts are engine/kv/kv_scheme.h's.
#ifndef KVSCOPE_KV_CODEC_H
#define KVSCOPE_KV_CODEC_H

#define KVS_CODEC_F16 0
#define KVS_CODEC_Q8_0 1
#define KVS_CODEC_Q4_0 2
#define KVS_CODEC_FP8 3
#define KVS_CODEC_AFFINE4 4
#define KVS_CODEC_TURBO4 5
#define KVS_CODEC_TURBO3 6
#define KVS_CODEC_TURBO2 7
#define KVS_CODEC_TURBO4G 8
#define KVS_CODEC_TURBO3G 9
#define KVS_CODEC_TURBO2G 10
// turbo3 with 10 codes per 32-bit word (bits 3k..3k+2 of word i hold code
// 10i + k) instead of its 2+1 bit planes: a layout experiment that
// `kvscope-cli bench-attention --kv turbo3w10` times; no kv scheme stores it.
#define KVS_CODEC_TURBO3W10 11
// Block-scaled turbo (one least-error scale per 32 rotated values).
#define KVS_CODEC_TURBO4B 12
#define KVS_CODEC_TURBO3B 13
#define KVS_CODEC_TURBO2B 14
// The block formats in rotated space (kv::RotatedScheme): the bytes of
// q8_0, q4_0, fp8 and affine4 for y = R x; attention reads them in R's space
// as it reads the turbo codecs, without their codebook.
#define KVS_CODEC_Q8_0R 15
#define KVS_CODEC_Q4_0R 16
#define KVS_CODEC_FP8R 17
#define KVS_CODEC_AFFINE4R 18
// Block-scaled turbo with 6- and 5-bit codes (a nibble plane, then a 2- or
// 1-bit plane of the high bits).
#define KVS_CODEC_TURBO6B 19
#define KVS_CODEC_TURBO5B 20
#define KVS_CODEC_COUNT 21

// Centroids a codebook codec passes in specialization constants (2^6).
#define KVS_CODEBOOK_SIZE 64

#endif
