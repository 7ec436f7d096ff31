// PyTorch 2.11's cuDNN graph-API convolution path (aten/src/ATen/native/cudnn/Conv_v8.cpp), replayed in its order
// on the real cudnn_frontend v0.x builders. Written from that order, not from its code; what matters to a library
// underneath is what this reproduces:
//   - the operation is built in a helper, so its tensor and convolution descriptors are destroyed before any
//     heuristics or plan exist;
//   - benchmark=False: engine configs from INSTANT heuristics (the graph destroyed before any plan is built); for
//     each config: build the plan (no handle on it), read its workspace, allocate that from the caching allocator
//     (out of memory: next config), execute (an error: next config). Then the same with the FALLBACK list;
//   - benchmark=True: plans of every INSTANT and FALLBACK config built while the graph lives; those whose
//     workspace exceeds the allocator's largest free block dropped; the largest remaining workspace allocated
//     (halved on out of memory); at most benchmark_limit plans timed once each; the fastest that executes kept;
//   - the kept plan then serves every later call (PyTorch's plan cache), each call allocating its workspace; where
//     that allocation fails, the plan is searched for again as above (Conv_v8.cpp catches the out-of-memory error
//     of a cached plan), and the new one serves the calls after.
// Engine configs whose numerical notes include down-conversion are filtered out, as PyTorch does (it also drops
// non-deterministic ones when asked for determinism, and tensor-core ones for float32 without TF32).
//
// Usage: torch_v0 --op fprop|dgrad|wgrad|fused --dtype float|half|bfloat16 --n N --c C --k K --h H --w W --r R --s S
//                 [--pad P --stride U --dil D --groups G --layout nchw|nhwc --d D --t T --z-alpha A]
//                 --data DIR --capacity BYTES (the problem's options: client.h)
//                 [--benchmark 0|1 --benchmark-limit L --calls K --deterministic 0|1]
//                 [--shrink-after J --shrink-to BYTES]: after J calls the allocator holds BYTES (memory other
//                 tensors took), and under the preload library its stand-in for the device's free memory follows
// Prints one JSON object (the configs tried, engine, workspace, times, the output's checksum, and the time of each
// call the kept plan served after the first: host wall clock, and the host backend's model clock where it has one);
// exit status 0 when the op ran, 1 when no engine ran it, 2 on bad usage.
// Built linked to cuDNN, or with NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING to reach it through dlopen + dlsym as XLA
// does (cudnn_calls.h); the report's "loading" says which.
#include <cudnn_frontend.h>
#include <cudnn_frontend_find_plan.h>
#include <cudnn_frontend_get_plan.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "client.h"
#include "cudnn_calls.h"

namespace fe = cudnn_frontend;
using rc::Json;

namespace {

struct CudnnError : std::runtime_error {
    cudnnStatus_t status;
    CudnnError(const char *what, cudnnStatus_t st) : std::runtime_error(what), status(st) {}
};

struct Data {
    rc::Buffer x, w, y, z, b;
};

struct Session {
    cudnnHandle_t handle = nullptr;
    rc::Problem p;
    Data data;
    rc::CachingAllocator alloc;
    bool deterministic = false;
    std::vector<std::string> tried;  // one JSON object per config or plan tried, in order
};

// The problem's layout gives the strides (PyTorch passes the tensor's own: channels_last ones for NHWC).
fe::Tensor tensor_desc(const rc::Problem &p, const std::vector<int64_t> &dims, int64_t uid, const void *ptr,
                       cudnnDataType_t type, bool is_virtual = false) {
    auto strides = p.strides(dims);
    return fe::TensorBuilder()
        .setDim(dims.size(), dims.data())
        .setStrides(strides.size(), strides.data())
        .setId(uid)
        .setAlignment(rc::alignment_of(ptr))
        .setDataType(type)
        .setVirtual(is_virtual)
        .build();
}

// 16-bit data convolves in float, as PyTorch asks.
fe::ConvDesc_v8 conv_desc(const rc::Problem &p) {
    auto n = static_cast<int64_t>(p.spatial);
    return fe::ConvDescBuilder()
        .setComputeType(CUDNN_DATA_FLOAT)
        .setMathMode(CUDNN_CROSS_CORRELATION)
        .setSpatialDimCount(n)
        .setSpatialStride(n, p.stride.data())
        .setPrePadding(n, p.pad.data())
        .setPostPadding(n, p.pad.data())
        .setDilation(n, p.dil.data())
        .build();
}

cudnnBackendDescriptorType_t op_kind(rc::Op op) {
    switch (op) {
    case rc::Op::dgrad: return CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR;
    case rc::Op::wgrad: return CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR;
    default: return CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR;
    }
}

fe::PointWiseDesc pointwise(cudnnPointwiseMode_t mode) {
    return fe::PointWiseDescBuilder().setMode(mode).setMathPrecision(CUDNN_DATA_FLOAT).build();
}

// conv -> add alpha * z -> add bias -> relu, the intermediates virtual float tensors (PyTorch's
// cudnn_convolution_add_relu).
fe::OperationGraph fused_graph(const Session &s) {
    const rc::Problem &p = s.p;
    auto type = static_cast<cudnnDataType_t>(p.dtype);
    auto add = pointwise(CUDNN_POINTWISE_ADD), add_bias = pointwise(CUDNN_POINTWISE_ADD);
    auto relu = pointwise(CUDNN_POINTWISE_RELU_FWD);
    auto conv = fe::OperationBuilder(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR)
                    .setxDesc(tensor_desc(p, p.xdim, 'x', s.data.x.get(), type))
                    .setyDesc(tensor_desc(p, p.ydim, 'C', s.data.y.get(), CUDNN_DATA_FLOAT, true))
                    .setwDesc(tensor_desc(p, p.wdim, 'w', s.data.w.get(), type))
                    .setAlpha(1.0f)
                    .setBeta(0.0f)
                    .setcDesc(conv_desc(p))
                    .build();
    auto add_op = fe::OperationBuilder(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)
                      .setxDesc(conv.getOutputTensor())
                      .setbDesc(tensor_desc(p, p.ydim, 'z', s.data.z.get(), type))
                      .setyDesc(tensor_desc(p, p.ydim, 'A', s.data.y.get(), CUDNN_DATA_FLOAT, true))
                      .setpwDesc(add)
                      .setAlpha(1.0f)
                      .setAlpha2(p.z_alpha)
                      .build();
    auto bias_op = fe::OperationBuilder(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)
                       .setxDesc(add_op.getOutputTensor())
                       .setbDesc(tensor_desc(p, p.bdim, 'b', s.data.b.get(), type))
                       .setyDesc(tensor_desc(p, p.ydim, 'B', s.data.y.get(), CUDNN_DATA_FLOAT, true))
                       .setpwDesc(add_bias)
                       .build();
    auto relu_op = fe::OperationBuilder(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)
                       .setxDesc(bias_op.getOutputTensor())
                       .setyDesc(tensor_desc(p, p.ydim, 'y', s.data.y.get(), type))
                       .setpwDesc(relu)
                       .build();
    std::array<fe::Operation const *, 4> ops = {&conv, &add_op, &bias_op, &relu_op};
    return fe::OperationGraphBuilder().setHandle(s.handle).setOperationGraph(ops.size(), ops.data()).build();
}

// Every descriptor but the graph dies when this returns.
fe::OperationGraph build_graph(const Session &s) {
    if (s.p.op == rc::Op::fused) return fused_graph(s);
    const rc::Problem &p = s.p;
    auto type = static_cast<cudnnDataType_t>(p.dtype);
    auto op = fe::OperationBuilder(op_kind(p.op))
                  .setxDesc(tensor_desc(p, p.xdim, 'x', s.data.x.get(), type))
                  .setyDesc(tensor_desc(p, p.ydim, 'y', s.data.y.get(), type))
                  .setwDesc(tensor_desc(p, p.wdim, 'w', s.data.w.get(), type))
                  .setcDesc(conv_desc(p))
                  .build();
    std::array<fe::Operation const *, 1> ops = {&op};
    return fe::OperationGraphBuilder().setHandle(s.handle).setOperationGraph(ops.size(), ops.data()).build();
}

void filter_configs(fe::EngineConfigList &from, fe::EngineConfigList &to, bool deterministic) {
    fe::filter(from, to, [deterministic](cudnnBackendDescriptor_t c) {
        if (deterministic && fe::hasNumericalNote<CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC>(c)) return true;
        return fe::hasNumericalNote<CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS>(c);
    });
}

std::vector<fe::GeneratorSource> sources(const Session &s, bool heuristics, bool fallback) {
    bool det = s.deterministic;
    auto kind = op_kind(s.p.op);
    fe::GeneratorSource heur = [det](fe::OperationGraph &g) {
        auto h = fe::EngineHeuristicsBuilder().setOperationGraph(g).setHeurMode(CUDNN_HEUR_MODE_INSTANT).build();
        auto &configs = h.getEngineConfig(h.getEngineConfigCount());
        fe::EngineConfigList kept;
        filter_configs(configs, kept, det);
        return kept;
    };
    fe::GeneratorSource fall = [det, kind](fe::OperationGraph &g) {
        auto f = fe::EngineFallbackListBuilder().setOperationGraph(g).setOperation(kind).build();
        auto &configs = f.getFallbackList();
        fe::EngineConfigList kept;
        filter_configs(configs, kept, det);
        return kept;
    };
    std::vector<fe::GeneratorSource> out;
    if (heuristics) out.push_back(heur);
    if (fallback) out.push_back(fall);
    return out;
}

// The configs only: the graph is gone before any plan is built.
fe::EngineConfigList configs_from(const Session &s, bool fallback, std::string &graph_tag) {
    auto graph = build_graph(s);
    graph_tag = graph.getTag();
    auto src = sources(s, !fallback, fallback);
    fe::EngineConfigGenerator generator(static_cast<int>(src.size()), src.data());
    return generator.generate_engine_config(graph);
}

struct Pointers {
    std::vector<void *> ptrs;
    std::vector<int64_t> uids;
};

Pointers pointers(const Session &s) {
    Pointers out{{s.data.x.get(), s.data.y.get(), s.data.w.get()}, {'x', 'y', 'w'}};
    if (s.p.op == rc::Op::fused) {
        out.ptrs.insert(out.ptrs.end(), {s.data.z.get(), s.data.b.get()});
        out.uids.insert(out.uids.end(), {'z', 'b'});
    }
    return out;
}

// run_conv_plan: the workspace from the caching allocator, then execute.
void run_plan(Session &s, const fe::ExecutionPlan &plan) {
    rc::cudnn::set_stream(s.handle, nullptr);
    int64_t ws = plan.getWorkspaceSize();
    auto block = s.alloc.allocate(ws);
    Pointers ptr = pointers(s);
    auto pack = fe::VariantPackBuilder()
                    .setWorkspacePointer(ws ? block.get() : nullptr)
                    .setDataPointers(static_cast<int64_t>(ptr.ptrs.size()), ptr.ptrs.data())
                    .setUids(static_cast<int64_t>(ptr.uids.size()), ptr.uids.data())
                    .build();
    cudnnStatus_t st = rc::cudnn::execute(s.handle, plan.get_raw_desc(), pack.get_raw_desc());
    if (st != CUDNN_STATUS_SUCCESS) throw CudnnError("cudnnBackendExecute", st);
}

std::string attempt(const std::string &tag, int64_t ws, const std::string &result, double time_ms = -1) {
    Json j;
    j.field("tag", tag).field("workspace", ws).field("result", result);
    if (time_ms >= 0) j.field("time_ms", time_ms);
    return j.str();
}

// Runs a plan, records the attempt; false (recorded) where PyTorch would go on to the next.
bool try_run(Session &s, const fe::ExecutionPlan &plan, double time_ms = -1) {
    std::string result = "ok";
    try {
        run_plan(s, plan);
    } catch (rc::OutOfMemory &) {
        result = "out of memory";
    } catch (CudnnError &e) {
        result = std::string("execute: ") + rc::cudnn::error_string(e.status);
    } catch (fe::cudnnException &e) {
        result = std::string("execute: ") + e.what();
    }
    s.tried.push_back(attempt(plan.getTag(), plan.getWorkspaceSize(), result, time_ms));
    return result == "ok";
}

std::unique_ptr<fe::ExecutionPlan> try_configs(Session &s, fe::EngineConfigList &configs, const std::string &tag) {
    for (auto &config : configs) {
        try {
            auto plan = fe::ExecutionPlanBuilder().setHandle(s.handle).setEngineConfig(config, tag).build();
            if (try_run(s, plan)) return std::unique_ptr<fe::ExecutionPlan>(new fe::ExecutionPlan(std::move(plan)));
        } catch (fe::cudnnException &e) {
            s.tried.push_back(attempt("", -1, std::string("build: ") + e.what()));
        }
    }
    return nullptr;
}

std::unique_ptr<fe::ExecutionPlan> search_heuristics(Session &s) {
    std::string tag;
    auto configs = configs_from(s, false, tag);
    if (auto plan = try_configs(s, configs, tag)) return plan;
    configs = configs_from(s, true, tag);
    return try_configs(s, configs, tag);
}

std::unique_ptr<fe::ExecutionPlan> search_benchmark(Session &s, int64_t limit, Json &out) {
    fe::executionPlans_t sorted;
    {
        auto graph = build_graph(s);
        auto src = sources(s, true, true);
        fe::EngineConfigGenerator generator(static_cast<int>(src.size()), src.data());
        auto plans = generator.cudnnGetPlan(s.handle, graph, [](const fe::ExecutionPlan &) { return false; });
        int64_t largest = s.alloc.largest_free_block(), max_ws = 0;
        fe::executionPlans_t valid;
        for (auto &plan : plans) {
            int64_t ws = plan.getWorkspaceSize();
            if (ws > largest) continue;
            max_ws = std::max(max_ws, ws);
            valid.emplace_back(std::move(plan));
        }
        out.field("plans_built", static_cast<int64_t>(plans.size()));
        out.field("plans_fitting", static_cast<int64_t>(valid.size()));
        rc::CachingAllocator::Block block;
        bool halved = false;
        while (max_ws) {
            try {
                block = s.alloc.allocate(max_ws);
                break;
            } catch (rc::OutOfMemory &) {
                max_ws /= 2;
                halved = true;
            }
        }
        if (halved) {
            fe::executionPlans_t kept;
            for (auto &plan : valid)
                if (plan.getWorkspaceSize() <= max_ws) kept.emplace_back(std::move(plan));
            valid = std::move(kept);
        }
        out.field("benchmark_workspace", max_ws);
        Pointers ptr = pointers(s);
        auto pack = fe::VariantPackBuilder()
                        .setDataPointers(static_cast<int64_t>(ptr.ptrs.size()), ptr.ptrs.data())
                        .setUids(static_cast<int64_t>(ptr.uids.size()), ptr.uids.data())
                        .setWorkspacePointer(max_ws ? block.get() : nullptr)
                        .build();
        sorted = fe::time_sorted_plan<fe::CudnnFindSamplingTechnique::CUDNN_FIND_SAMPLE_ONCE>(
            s.handle, std::move(valid), pack, static_cast<uint64_t>(limit));
        out.field("plans_timed", static_cast<int64_t>(sorted.size()));
    }  // the graph and the benchmark workspace are released before the chosen plan runs
    for (auto &plan : sorted) {
        if (try_run(s, plan, static_cast<double>(plan.getExecutionTime())))
            return std::unique_ptr<fe::ExecutionPlan>(new fe::ExecutionPlan(std::move(plan)));
    }
    return nullptr;
}

// Memory shrinks to `bytes`: the allocator's, and -- under the preload library, whose export this looks up -- the
// stand-in for the device's free memory the preload library reads (on a GPU the driver would report the drop).
void shrink(Session &s, int64_t bytes) {
    s.alloc.set_capacity(bytes);
    using set_option_fn = int (*)(const char *, const char *);
    if (void *sym = dlsym(RTLD_DEFAULT, "ucudnn_set_option")) {
        set_option_fn set_option;
        std::memcpy(&set_option, &sym, sizeof set_option);
        set_option("UCUDNN_HOST_DEVICE_MEMORY", std::to_string(bytes).c_str());
    }
}

Data load(const rc::Problem &p, const std::string &dir) {
    Data d;
    d.x = rc::read_file(dir + "/x.bin", rc::Problem::count(p.xdim) * p.elem);
    d.w = rc::read_file(dir + "/w.bin", rc::Problem::count(p.wdim) * p.elem);
    d.y = rc::read_file(dir + "/y.bin", rc::Problem::count(p.ydim) * p.elem);
    if (p.op == rc::Op::fused) {
        d.z = rc::read_file(dir + "/z.bin", rc::Problem::count(p.ydim) * p.elem);
        d.b = rc::read_file(dir + "/b.bin", rc::Problem::count(p.bdim) * p.elem);
    }
    return d;
}

int run(int argc, char **argv) {
    rc::Args args(argc, argv);
    Session s{nullptr, rc::Problem::from(args), {}, rc::CachingAllocator(args.num("capacity")), false, {}};
    s.deterministic = args.num("deterministic", "0") != 0;
    std::string dir = args.str("data");
    bool benchmark = args.num("benchmark", "0") != 0;
    int64_t limit = args.num("benchmark-limit", "10"), calls = args.num("calls", "1");
    int64_t shrink_after = args.num("shrink-after", "0"), shrink_to = args.num("shrink-to", "0");
    s.data = load(s.p, dir);
    Json out;
    out.field("program", "torch_v0").field("op", s.p.op_name).field("benchmark", benchmark);
    out.field("loading", rc::cudnn::loading);
    rc::cudnn::open();
    cudnnStatus_t st = rc::cudnn::create(&s.handle);
    if (st != CUDNN_STATUS_SUCCESS) throw CudnnError("cudnnCreate", st);
    std::unique_ptr<fe::ExecutionPlan> plan;
    std::string error;
    try {
        plan = benchmark ? search_benchmark(s, limit ? limit : 10000, out) : search_heuristics(s);
        if (!plan) error = "unable to find an engine to execute this computation";
    } catch (fe::cudnnException &e) {
        error = e.what();
    }
    int64_t executed = plan ? 1 : 0, searched_again = 0;
    std::vector<double> wall_ms, model_ms;
    Json again;  // what a search after a cached plan's out-of-memory reports
    for (; plan && executed < calls; executed++) {  // PyTorch's plan cache serves these
        if (shrink_after > 0 && executed == shrink_after) shrink(s, shrink_to);
        rc::CallTimer timer;
        try {
            run_plan(s, *plan);
        } catch (rc::OutOfMemory &) {  // its workspace cannot be had any more: search again, as PyTorch does
            searched_again++;
            plan = benchmark ? search_benchmark(s, limit ? limit : 10000, again) : search_heuristics(s);
            if (!plan) error = "unable to find an engine to execute this computation";
        }
        if (plan) timer.stop(wall_ms, model_ms);
    }
    out.field("searched_again", searched_again);
    if (searched_again && benchmark) out.raw("search_again", again.str());
    out.raw("tried", Json::array(s.tried, [](const std::string &t) { return t; }));
    if (plan) {
        out.field("status", "ok").field("engine", plan->getTag()).field("workspace", plan->getWorkspaceSize());
        char role = s.p.output_role();
        const rc::Buffer &result = role == 'x' ? s.data.x : role == 'w' ? s.data.w : s.data.y;
        out.raw("checksum", rc::checksum(result, s.p.dtype));
        rc::write_file(dir + "/out.bin", result);
    } else {
        out.field("status", "error").field("error", error);
    }
    out.field("calls", executed).field("allocator_peak", s.alloc.peak());
    rc::CallTimer::report(out, wall_ms, model_ms);
    plan.reset();
    rc::cudnn::destroy(s.handle);
    std::printf("%s\n", out.str().c_str());
    return executed ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) { return rc::guarded_main("torch_v0", argc, argv, run); }
