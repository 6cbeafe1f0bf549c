export CUDA_MODULE_LOADING=EAGER
KERNELS="wgmma_208wt wgmma_208wtp wgmma_128wtp" CASES="vit3 vit" EXTRA_TARGETS="bench_step bench_serve surf" bash scripts/attention_matrix.sh
grep -E "ERROR|rror" $OUT/gpu_test_kernels_attention.log | head -5
if grep -q "rc=0" $OUT/summary.txt; then
TARGETS="bench_step" TESTS=none STEP_ARGS="--tiles 3 --prefill 924 --prefill-seqs 1 --decode 100 --context 5000" SERVE_ARGS="--concurrency 100 --steps 10 --mode stateful;--concurrency 100 --steps 10 --mode stateful --vit-attention-persistent 0" CALL_BUDGET=420 bash scripts/gpu_call.sh
fi
rm -f $OUT/configure.log $OUT/build.log
ls $OUT
