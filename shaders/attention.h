// Push constants of the attention family (kv_write.comp, kv_encode.comp,
// attention.comp, attention_reduce.comp, kv_rotate.comp, and the indexer's
// kv_index.comp, index_score.comp, index_select.comp, kv_gather.comp) and the
// size of their KV page-array binding. The page
// layout is engine/gpu/attention_kernels.h's KvPageLayout; offsets here are
// in 32-bit words inside one page. A shader has one push-constant block, so
// GLSL sees only the block its file selects (KVS_KV_WRITE, KVS_ATTENTION,
// KVS_ATTENTION_REDUCE, KVS_KV_ROTATE or KVS_INDEXER defined before the include); C++ sees
// all of them.
#include "push_common.h"

// Slots of the page-array binding: one storage-buffer descriptor per page,
// plus at most 4 plain bindings, stays within the 32 per stage lavapipe has.
#define KVS_ATTENTION_MAX_PAGES 16
// The page slot of cache row `row` in pages of `rows` rows: row / rows, which
// is below the slot count for a growing stream; a ring page, bound in every
// slot, wraps its rows past that, and any slot holds it.
#define KVS_PAGE_OF(row, rows) (((row) / (rows)) % KVS_ATTENTION_MAX_PAGES)

#if defined(__cplusplus) || defined(KVS_KV_WRITE)
KVS_PUSH_BEGIN(KvWritePush)
  KVS_UINT n;            // new tokens (rows) to write
  KVS_UINT pos0;         // cache row of the first one
  KVS_UINT nHeadKv;
  KVS_UINT headDim;
  KVS_UINT rowsPerPage;
  KVS_UINT keyRowWords;    // K row stride: rowBytes / 4
  KVS_UINT valueRowWords;  // V row stride
  KVS_UINT keyOffset;      // this layer's K block in a page
  KVS_UINT valueOffset;    // this layer's V block in a page
  KVS_UINT part;           // kv_encode.comp: 0 encodes the K rows, 1 the V rows
KVS_PUSH_END(KvWritePush)
#endif

#if defined(__cplusplus) || defined(KVS_ATTENTION)
KVS_PUSH_BEGIN(AttentionPush)
  KVS_UINT n;            // query tokens, at rows pos0 .. pos0 + n - 1
  KVS_UINT pos0;
  KVS_UINT nHead;        // query heads; KV heads = nHead / GQA (specialization constant)
  KVS_UINT rowsPerPage;
  KVS_UINT keyRowWords;
  KVS_UINT valueRowWords;
  KVS_UINT keyOffset;
  KVS_UINT valueOffset;
  KVS_UINT tokenTiles;   // ceil(n / TOKENS)
  KVS_UINT splits;       // this dispatch cuts its rows into `splits` ranges of splitRows
  KVS_UINT splitRows;
  // The stats and partial outputs hold allSplits splits (1: this dispatch is
  // the only one and writes the output); this dispatch's are splitBase ..
  // splitBase + splits - 1 (a pass over the codes and one over the precision
  // tail share the arrays).
  KVS_UINT allSplits;
  KVS_UINT splitBase;
  KVS_UINT scoreStride;  // 0: pass 2 recomputes scores; else row stride of the score buffer
  // 0, or the word of page 0 where [nHeadKv] row counts start: KV head h
  // then reads only rows [0, count[h] - countTrim) (the gathered rows of an
  // indexed step, less the last countTrim: those of the precision tail).
  KVS_UINT rowCounts;
  KVS_UINT countTrim;
  KVS_FLOAT scale;       // 1 / sqrt(head_dim)
  KVS_FLOAT sparseV;     // normalized weights below this are dropped (0: none)
  KVS_UINT window;       // 0, or a sliding window: query at p sees rows (p - window, p]
  KVS_UINT rowStart;     // the first row any query sees; splits cut [rowStart, pos0 + n)
  KVS_UINT sinks;        // 1: the Sinks binding holds an attention-sink logit per query head
  // The precision tail (kv::CachedRows): the query at p reads rows from
  // tailStart(p) = max(p + 1 - tailRows, tailFloor) at f16 from the tail's
  // ring, older ones as codes. tailSide 0: every row is read here; 1: only
  // rows older than the query's tail (the codes); 2: only its tail's.
  KVS_UINT tailRows;
  KVS_UINT tailFloor;
  KVS_UINT tailSide;
  // The KV heads this dispatch attends: kvHeads of them from kvHeadBase (0:
  // every KV head), with their query heads (the indexer's dense heads).
  KVS_UINT kvHeadBase;
  KVS_UINT kvHeads;
KVS_PUSH_END(AttentionPush)
#endif

#if defined(__cplusplus) || defined(KVS_ATTENTION_REDUCE)
KVS_PUSH_BEGIN(AttentionReducePush)
  KVS_UINT count;   // n * nHead * headDim outputs
  KVS_UINT splits;  // partial results per output, `count` apart
KVS_PUSH_END(AttentionReducePush)
#endif

#if defined(__cplusplus) || defined(KVS_KV_ROTATE)
KVS_PUSH_BEGIN(KvRotatePush)
  KVS_UINT count;  // vectors of head_dim values, consecutive in the input and output
KVS_PUSH_END(KvRotatePush)
#endif

#if defined(__cplusplus) || defined(KVS_INDEXER)
// The indexer's kernels (engine/gpu/attention_indexer.cpp); each reads the
// fields its comment names.
KVS_PUSH_BEGIN(IndexerPush)
  KVS_UINT nHeadKv;
  KVS_UINT rowsPerPage;    // KV page rows                      (kv_index, kv_gather)
  KVS_UINT keyRowWords;    // the layer's K rows and block      (kv_index, kv_gather)
  KVS_UINT keyOffset;
  KVS_UINT valueRowWords;  // the layer's V rows and block      (kv_gather)
  KVS_UINT valueOffset;
  KVS_UINT pageRows;       // rows of a sidecar page (16, 32, 64)
  KVS_UINT entryWords;     // words of a sidecar entry
  KVS_UINT sidecarBase;    // word where this layer's entries start
  KVS_UINT firstPage;      // kv_index: rebuilds sidecar pages firstPage..
  KVS_UINT pages;          // sidecar pages: rebuilt (kv_index), scored (index_score)
  KVS_UINT rows;           // cached rows
  KVS_UINT sinks;          // index_select: kv::selectRows's options
  KVS_UINT window;
  KVS_UINT wanted;         // pages picked: ceil(topK / pageRows)
  KVS_UINT listBase;       // word of this layer's selection lists
  KVS_UINT listStride;     // words per KV head's list: 1 (the count) + capacity
  KVS_UINT gatherRows;     // kv_gather: rows per KV head in the gathered page
KVS_PUSH_END(IndexerPush)
#endif
