export CUDA_MODULE_LOADING=EAGER
TEST=0 KERNELS="wgmma_208wt wgmma_208wtp wgmma_208wt wgmma_208wtp" CASES="vit3 vit" EXTRA_TARGETS="bench_step" bash scripts/attention_matrix.sh
TARGETS="bench_step" TESTS=none STEP_ARGS="--tiles 3 --prefill 924 --prefill-seqs 1 --decode 100 --context 5000 --vit-attention-persistent 1;--tiles 3 --prefill 924 --prefill-seqs 1 --decode 100 --context 5000 --vit-attention-persistent 0;--tiles 24 --prefill 924 --prefill-seqs 1 --decode 100 --context 5000 --vit-attention-persistent 1" CALL_BUDGET=400 bash scripts/gpu_call.sh > /dev/null
for f in $OUT/bench_step*.log; do echo "== $f"; grep -E "^### vision batch|vit.attention|vision batch with the wgmma attention" $f; done
rm -f $OUT/configure.log $OUT/build.log
