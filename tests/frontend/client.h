// What the real-client programs share, kept free of the frontend headers so it compiles in a second: the command
// line, the problem's shapes, data files, a simulated caching allocator and JSON output.
//
// A program reads the three convolution buffers from DIR/x.bin, DIR/w.bin and DIR/y.bin (plus z.bin and b.bin
// for the fused graph), runs its op the way its client does, and writes the op's output buffer to DIR/out.bin.
// Buffer roles follow PyTorch's naming: x is the input or its gradient, w the filter or its gradient, y the
// output or its gradient; the op decides which one it writes (fprop and fused: y, dgrad: x, wgrad: w).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace rc {

// "--name value" pairs; every value is required unless a default is given.
class Args {
  public:
    Args(int argc, char **argv);
    std::string str(const std::string &name, const char *fallback = nullptr) const;
    int64_t num(const std::string &name, const char *fallback = nullptr) const;
    // A comma-separated list of `count` integers; one value stands for all `count`.
    std::vector<int64_t> nums(const std::string &name, const char *fallback, size_t count) const;

  private:
    std::map<std::string, std::string> kv_;
};

enum class Op { fprop, dgrad, wgrad, fused };

// The problem: --n --c --k --h --w --r --s, and --d --t (the input's and filter's depth) for a 3-D convolution;
// --pad --stride --dil, each one value for every spatial dim or one per dim (e.g. 1,0); --groups G (C and K
// multiples of G; the filter holds C/G input channels); --layout nchw|nhwc (channels-last tensors and filter, as
// PyTorch's channels_last memory format lays them out). Dims are always in NC[D]HW order; the layout sets the
// strides, and the data files hold the tensors in that layout's memory order.
struct Problem {
    Op op;
    std::string op_name;
    int dtype;               // cudnnDataType_t of the data: CUDNN_DATA_FLOAT, _HALF or _BFLOAT16
    size_t elem;             // bytes per element
    int64_t n, c, k, h, w, r, s, groups;
    int spatial;             // 2 or 3
    bool nhwc;
    std::vector<int64_t> pad, stride, dil;  // one per spatial dim
    float z_alpha;           // the fused graph's scale of z
    std::vector<int64_t> xdim, wdim, ydim, bdim;
    static Problem from(const Args &a);
    static std::vector<int64_t> packed(const std::vector<int64_t> &dims);  // NCHW strides
    std::vector<int64_t> strides(const std::vector<int64_t> &dims) const;  // the layout's strides
    static int64_t count(const std::vector<int64_t> &dims);
    char output_role() const { return op == Op::dgrad ? 'x' : op == Op::wgrad ? 'w' : 'y'; }
};

// Memory as a device would hand it out: 256-byte aligned, never NULL unless empty.
class Buffer {
  public:
    Buffer() = default;
    explicit Buffer(size_t bytes);
    Buffer(Buffer &&o) noexcept;
    Buffer &operator=(Buffer &&o) noexcept;
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;
    ~Buffer();
    void *get() const { return p_; }
    size_t size() const { return n_; }

  private:
    void *p_ = nullptr;
    size_t n_ = 0;
};

Buffer read_file(const std::string &path, size_t expect_bytes);
// {"sum": ..., "abs_sum": ...} of a buffer of float32 (elem 4) or float16 (elem 2) values, in double.
std::string checksum(const Buffer &b, int dtype);  // dtype: 0 float, 2 half, 9 bfloat16
void write_file(const std::string &path, const Buffer &b);

struct OutOfMemory : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// PyTorch's caching allocator as these programs see it: `capacity` bytes in one pool; a request larger than the
// largest free block throws OutOfMemory (what c10's OutOfMemoryError is to Conv_v8.cpp). Blocks are real memory
// because the host backend computes in them.
class CachingAllocator {
  public:
    explicit CachingAllocator(int64_t capacity) : capacity_(capacity) {}
    class Block {
      public:
        Block() = default;
        Block(CachingAllocator *owner, size_t bytes);
        Block(Block &&o) noexcept;
        Block &operator=(Block &&o) noexcept;
        ~Block();
        void *get() const { return buf_.get(); }

      private:
        void release();
        CachingAllocator *owner_ = nullptr;
        size_t bytes_ = 0;
        Buffer buf_;
    };
    Block allocate(int64_t bytes);
    int64_t largest_free_block() const { return capacity_ - used_; }
    void set_capacity(int64_t capacity) { capacity_ = capacity; }  // memory taken by something else, or given back
    int64_t peak() const { return peak_; }

  private:
    int64_t capacity_, used_ = 0, peak_ = 0;
};

// Alignment PyTorch gives a tensor descriptor: the largest power of two (at most 32) dividing the address.
int64_t alignment_of(const void *p);

// A JSON object built up field by field.
class Json {
  public:
    Json &field(const std::string &k, const std::string &v);
    Json &field(const std::string &k, const char *v) { return field(k, std::string(v)); }
    Json &field(const std::string &k, int64_t v);
    Json &field(const std::string &k, int v) { return field(k, static_cast<int64_t>(v)); }
    Json &field(const std::string &k, double v);
    Json &field(const std::string &k, bool v);
    Json &raw(const std::string &k, const std::string &json);
    std::string str() const { return "{" + body_ + "}"; }
    static std::string quote(const std::string &s);
    static std::string number(double v);  // a JSON number (null when not finite)
    template <typename T, typename F> static std::string array(const std::vector<T> &v, F each) {
        std::string out = "[";
        for (size_t i = 0; i < v.size(); i++) out += (i ? "," : "") + each(v[i]);
        return out + "]";
    }

  private:
    void key(const std::string &k);
    std::string body_;
};

// The time of one call: the host's monotonic clock, and the host backend's model clock (the modelled time of the
// executions it ran, UCUDNN_HOST_TIMING=model) where the cuDNN library underneath exports one.
class CallTimer {
  public:
    CallTimer();
    void stop(std::vector<double> &wall_ms, std::vector<double> &model_ms) const;
    // "call_ms" (and "call_model_ms" when the model clock is there) as arrays.
    static void report(Json &out, const std::vector<double> &wall_ms, const std::vector<double> &model_ms);
    // The model clock (ms, this thread), or a negative value where the library has none or is not modelling.
    static double model_now();

  private:
    double wall0_, model0_;
};

// main() of a program: run(argc, argv)'s exit status; a bad command line exits 2 with the message on stderr, any
// other exception prints {"program": ..., "status": "error", "error": ...} and exits 1.
int guarded_main(const char *program, int argc, char **argv, int (*run)(int, char **));

}  // namespace rc
