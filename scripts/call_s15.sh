export CUDA_MODULE_LOADING=EAGER
T="gpu_test_kernels_attention gpu_test_gpu_forward gpu_test_cuda_engine gpu_test_decode_graphs gpu_test_agent_gpu gpu_test_vision_batch gpu_test_replicas_gpu"
TARGETS="$T bench_serve surf" TESTS="$T" SERVE_ARGS="--concurrency 100 --steps 10 --mode stateful" CALL_BUDGET=540 bash scripts/gpu_call.sh
rm -f $OUT/configure.log $OUT/build.log $OUT/gpu_test_kernels_attention.log
ls $OUT
