"""CUDA C of device function pointers and virtual calls (a table of functions, a pointer chosen
per thread, a virtual method): the source both the engine's indirect-call tests and the
conformance builds compile."""

FUNCTION_POINTERS = r"""
typedef float (*op_t)(float, float);
__device__ __noinline__ float addf(float a, float b) { return a + b; }
__device__ __noinline__ float mulf(float a, float b) { return a * b; }
__device__ __noinline__ float subf(float a, float b) { return a - b; }
__device__ op_t table[3] = {addf, mulf, subf};
struct Shape { virtual __device__ float area(float s) const = 0; };
struct Square : Shape { __device__ float area(float s) const override { return s * s; } };
struct Half : Shape { __device__ float area(float s) const override { return 0.5f * s * s; } };
extern "C" __global__ void from_table(const float* a, const float* b, const int* which, float* out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    out[t] = table[which[t]](a[t], b[t]);
}
extern "C" __global__ void chosen(const float* a, const float* b, const int* which, float* out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    op_t f = which[t] == 0 ? addf : (which[t] == 1 ? mulf : subf);
    out[t] = f(a[t], b[t]);
}
extern "C" __global__ void virtual_call(const float* a, const int* which, float* out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    Square sq; Half half;
    const Shape* s = which[t] & 1 ? (const Shape*)&sq : (const Shape*)&half;
    out[t] = s->area(a[t]);
}
"""
