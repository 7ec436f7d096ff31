// See client.h.
#include "client.h"

#include <dlfcn.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <ctime>

namespace rc {

Args::Args(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a.rfind("--", 0) != 0 || i + 1 >= argc) throw std::invalid_argument("expected --name value, got " + a);
        kv_[a.substr(2)] = argv[++i];
    }
}

std::string Args::str(const std::string &name, const char *fallback) const {
    auto it = kv_.find(name);
    if (it != kv_.end()) return it->second;
    if (!fallback) throw std::invalid_argument("missing --" + name);
    return fallback;
}

int64_t Args::num(const std::string &name, const char *fallback) const {
    std::string v = str(name, fallback);
    char *end = nullptr;
    long long n = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end) throw std::invalid_argument("--" + name + " wants an integer, got " + v);
    return n;
}

std::vector<int64_t> Args::nums(const std::string &name, const char *fallback, size_t count) const {
    std::string v = str(name, fallback);
    std::vector<int64_t> out;
    size_t at = 0;
    while (true) {
        size_t comma = v.find(',', at);
        std::string part = v.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        char *end = nullptr;
        long long n = std::strtoll(part.c_str(), &end, 10);
        if (part.empty() || *end) throw std::invalid_argument("--" + name + " wants integers, got " + v);
        out.push_back(n);
        if (comma == std::string::npos) break;
        at = comma + 1;
    }
    if (out.size() == 1) out.assign(count, out[0]);
    if (out.size() != count)
        throw std::invalid_argument("--" + name + " wants 1 or " + std::to_string(count) + " values, got " + v);
    return out;
}

std::vector<int64_t> Problem::packed(const std::vector<int64_t> &dims) {
    std::vector<int64_t> s(dims.size(), 1);
    for (size_t i = dims.size() - 1; i-- > 0;) s[i] = s[i + 1] * dims[i + 1];
    return s;
}

std::vector<int64_t> Problem::strides(const std::vector<int64_t> &dims) const {
    if (!nhwc) return packed(dims);
    // Channels last: C innermost, then the spatial dims from the last to the first, then N.
    std::vector<int64_t> s(dims.size(), 1);
    int64_t step = dims[1];
    for (size_t i = dims.size() - 1; i >= 2; i--) {
        s[i] = step;
        step *= dims[i];
    }
    s[0] = step;
    return s;
}

int64_t Problem::count(const std::vector<int64_t> &dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
}

Problem Problem::from(const Args &a) {
    Problem p;
    p.op_name = a.str("op");
    static const std::map<std::string, Op> ops = {
        {"fprop", Op::fprop}, {"dgrad", Op::dgrad}, {"wgrad", Op::wgrad}, {"fused", Op::fused}};
    auto it = ops.find(p.op_name);
    if (it == ops.end()) throw std::invalid_argument("--op: one of fprop, dgrad, wgrad, fused");
    p.op = it->second;
    std::string dt = a.str("dtype", "float");
    if (dt == "float") {
        p.dtype = 0;  // CUDNN_DATA_FLOAT
        p.elem = 4;
    } else if (dt == "half") {
        p.dtype = 2;  // CUDNN_DATA_HALF
        p.elem = 2;
    } else if (dt == "bfloat16") {
        p.dtype = 9;  // CUDNN_DATA_BFLOAT16
        p.elem = 2;
    } else {
        throw std::invalid_argument("--dtype: float, half or bfloat16");
    }
    p.n = a.num("n"), p.c = a.num("c"), p.k = a.num("k"), p.h = a.num("h"), p.w = a.num("w");
    p.r = a.num("r"), p.s = a.num("s"), p.groups = a.num("groups", "1");
    bool deep = a.str("d", "").size() > 0;
    p.spatial = deep ? 3 : 2;
    std::string layout = a.str("layout", "nchw");
    if (layout != "nchw" && layout != "nhwc") throw std::invalid_argument("--layout: nchw or nhwc");
    p.nhwc = layout == "nhwc";
    size_t sp = static_cast<size_t>(p.spatial);
    p.pad = a.nums("pad", "0", sp), p.stride = a.nums("stride", "1", sp), p.dil = a.nums("dil", "1", sp);
    if (p.groups < 1 || p.c % p.groups || p.k % p.groups)
        throw std::invalid_argument("--groups: a divisor of both --c and --k");
    p.z_alpha = static_cast<float>(std::atof(a.str("z-alpha", "1").c_str()));
    std::vector<int64_t> in = {p.h, p.w}, filt = {p.r, p.s};
    if (deep) {
        in.insert(in.begin(), a.num("d"));
        filt.insert(filt.begin(), a.num("t"));
    }
    p.xdim = {p.n, p.c};
    p.wdim = {p.k, p.c / p.groups};
    p.ydim = {p.n, p.k};
    p.bdim = {1, p.k};
    for (size_t i = 0; i < sp; i++) {
        p.xdim.push_back(in[i]);
        p.wdim.push_back(filt[i]);
        p.ydim.push_back(1 + (in[i] + 2 * p.pad[i] - ((filt[i] - 1) * p.dil[i] + 1)) / p.stride[i]);
        p.bdim.push_back(1);
    }
    return p;
}

Buffer::Buffer(size_t bytes) : n_(bytes) {
    if (!bytes) return;
    p_ = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (!p_) throw std::bad_alloc();
}

Buffer::Buffer(Buffer &&o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }

Buffer &Buffer::operator=(Buffer &&o) noexcept {
    if (this != &o) {
        std::free(p_);
        p_ = o.p_, n_ = o.n_;
        o.p_ = nullptr, o.n_ = 0;
    }
    return *this;
}

Buffer::~Buffer() { std::free(p_); }

Buffer read_file(const std::string &path, size_t expect_bytes) {
    FILE *f = std::fopen(path.c_str(), "rb");
    if (!f) throw std::runtime_error("cannot open " + path);
    Buffer b(expect_bytes);
    size_t got = expect_bytes ? std::fread(b.get(), 1, expect_bytes, f) : 0;
    bool extra = std::fgetc(f) != EOF;
    std::fclose(f);
    if (got != expect_bytes || extra)
        throw std::runtime_error(path + ": not " + std::to_string(expect_bytes) + " bytes");
    return b;
}

namespace {

double half_to_double(uint16_t h) {
    int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    double magnitude = exponent == 0    ? std::ldexp(mantissa, -24)
                       : exponent == 31 ? (mantissa ? NAN : INFINITY)
                                        : std::ldexp(mantissa + 1024, exponent - 25);
    return (h & 0x8000) ? -magnitude : magnitude;
}

}  // namespace

std::string checksum(const Buffer &b, int dtype) {
    double sum = 0, abs_sum = 0;
    size_t elem = dtype == 0 ? 4 : 2;
    for (size_t i = 0; i < b.size() / elem; i++) {
        double v;
        if (dtype == 2) {
            v = half_to_double(static_cast<const uint16_t *>(b.get())[i]);
        } else if (dtype == 9) {
            uint32_t bits = static_cast<uint32_t>(static_cast<const uint16_t *>(b.get())[i]) << 16;
            float f;
            std::memcpy(&f, &bits, sizeof f);
            v = f;
        } else {
            float f;
            std::memcpy(&f, static_cast<const char *>(b.get()) + i * elem, sizeof f);
            v = f;
        }
        sum += v;
        abs_sum += std::fabs(v);
    }
    return Json().field("sum", sum).field("abs_sum", abs_sum).str();
}

void write_file(const std::string &path, const Buffer &b) {
    FILE *f = std::fopen(path.c_str(), "wb");
    if (!f) throw std::runtime_error("cannot create " + path);
    bool ok = std::fwrite(b.get(), 1, b.size(), f) == b.size();
    ok = std::fclose(f) == 0 && ok;
    if (!ok) throw std::runtime_error("cannot write " + path);
}

CachingAllocator::Block::Block(CachingAllocator *owner, size_t bytes) : owner_(owner), bytes_(bytes), buf_(bytes) {}

CachingAllocator::Block::Block(Block &&o) noexcept : owner_(o.owner_), bytes_(o.bytes_), buf_(std::move(o.buf_)) {
    o.owner_ = nullptr, o.bytes_ = 0;
}

CachingAllocator::Block &CachingAllocator::Block::operator=(Block &&o) noexcept {
    if (this != &o) {
        release();
        owner_ = o.owner_, bytes_ = o.bytes_, buf_ = std::move(o.buf_);
        o.owner_ = nullptr, o.bytes_ = 0;
    }
    return *this;
}

void CachingAllocator::Block::release() {
    if (owner_) owner_->used_ -= static_cast<int64_t>(bytes_);
    owner_ = nullptr, bytes_ = 0;
    buf_ = Buffer();
}

CachingAllocator::Block::~Block() { release(); }

CachingAllocator::Block CachingAllocator::allocate(int64_t bytes) {
    if (bytes < 0 || bytes > largest_free_block())
        throw OutOfMemory("tried to allocate " + std::to_string(bytes) + " bytes, " +
                          std::to_string(largest_free_block()) + " free");
    used_ += bytes;
    if (used_ > peak_) peak_ = used_;
    return Block(this, static_cast<size_t>(bytes));
}

int64_t alignment_of(const void *p) {
    auto address = reinterpret_cast<uintptr_t>(p);
    int64_t a = 1;
    while (a < 32 && address % static_cast<uintptr_t>(a * 2) == 0) a *= 2;
    return a;
}

std::string Json::quote(const std::string &s) {
    std::string out = "\"";
    for (unsigned char ch : s) {
        if (ch == '"' || ch == '\\') {
            out += '\\';
            out += static_cast<char>(ch);
        } else if (ch < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", ch);
            out += buf;
        } else {
            out += static_cast<char>(ch);
        }
    }
    return out + "\"";
}

void Json::key(const std::string &k) {
    if (!body_.empty()) body_ += ",";
    body_ += quote(k) + ":";
}

Json &Json::field(const std::string &k, const std::string &v) {
    key(k);
    body_ += quote(v);
    return *this;
}

Json &Json::field(const std::string &k, int64_t v) {
    key(k);
    body_ += std::to_string(v);
    return *this;
}

std::string Json::number(double v) {
    if (!std::isfinite(v)) return "null";
    std::ostringstream os;
    os.precision(17);
    os << v;
    return os.str();
}

Json &Json::field(const std::string &k, double v) {
    key(k);
    body_ += number(v);
    return *this;
}

Json &Json::field(const std::string &k, bool v) {
    key(k);
    body_ += v ? "true" : "false";
    return *this;
}

Json &Json::raw(const std::string &k, const std::string &json) {
    key(k);
    body_ += json;
    return *this;
}

namespace {

double wall_now() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

}  // namespace

double CallTimer::model_now() {
    // Looked up, not linked: a real cuDNN has neither name. In the global scope where cuDNN is linked; else in the
    // libcudnn.so.9 a client loaded RTLD_LOCAL (matched by soname), once it has loaded one.
    using clock_fn = double (*)();
    using flag_fn = int (*)();
    static std::atomic<clock_fn> clock{nullptr};
    static std::atomic<flag_fn> modelling{nullptr};
    if (!clock.load() || !modelling.load()) {
        void *scope = RTLD_DEFAULT, *local = nullptr;  // RTLD_DEFAULT is a null pointer
        if (!dlsym(scope, "ucudnn_host_model_clock_ms")) {
            scope = local = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_NOLOAD);
            if (!local) return -1.0;
        }
        modelling = reinterpret_cast<flag_fn>(dlsym(scope, "ucudnn_host_timing_model"));
        clock = reinterpret_cast<clock_fn>(dlsym(scope, "ucudnn_host_model_clock_ms"));
        if (local) dlclose(local);  // the client's own reference keeps it loaded
        if (!clock.load() || !modelling.load()) return -1.0;
    }
    return modelling.load()() ? clock.load()() : -1.0;
}

CallTimer::CallTimer() : wall0_(wall_now()), model0_(model_now()) {}

void CallTimer::stop(std::vector<double> &wall_ms, std::vector<double> &model_ms) const {
    wall_ms.push_back(wall_now() - wall0_);
    if (model0_ >= 0) model_ms.push_back(model_now() - model0_);
}

void CallTimer::report(Json &out, const std::vector<double> &wall_ms, const std::vector<double> &model_ms) {
    out.raw("call_ms", Json::array(wall_ms, Json::number));
    if (!model_ms.empty()) out.raw("call_model_ms", Json::array(model_ms, Json::number));
}

int guarded_main(const char *program, int argc, char **argv, int (*run)(int, char **)) {
    try {
        return run(argc, argv);
    } catch (std::invalid_argument &e) {
        std::fprintf(stderr, "%s: %s\n", program, e.what());
        return 2;
    } catch (std::exception &e) {
        Json out;
        out.field("program", program).field("status", "error").field("error", e.what());
        std::printf("%s\n", out.str().c_str());
        return 1;
    }
}

}  // namespace rc
