export CUDA_MODULE_LOADING=EAGER
TEST=0 KERNELS="wgmma_64ws wgmma_128ws" CASES="chunk llm small" bash scripts/attention_matrix.sh
mv $OUT/bench_attention_matrix.log $OUT/bench_attention_matrix_llm.log
TEST=0 KERNELS="wgmma_128wt wgmma_208wt" CASES="vit3 vit" bash scripts/attention_matrix.sh
KERNEL="wgmma 208wt" CASE=vit3 bash scripts/ncu_attention_source.sh 2>&1 | tail -75
KERNEL="wgmma 64ws" CASE=chunk bash scripts/ncu_attention_source.sh 2>&1 | tail -75
ls -la $OUT
