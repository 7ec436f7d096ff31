// One convolution through the real cudnn_frontend v1 graph API (cudnn_frontend::graph::Graph), the path newer
// clients take: tensors by attributes, conv_fprop / conv_dgrad / conv_wgrad, then validate, build the operation
// graph, create execution plans from heuristics (mode A, then the FALLBACK list), drop the configs whose
// workspace exceeds the caller's limit (deselect_workspace_greater_than, read from ENGINECFG_WORKSPACE_SIZE),
// check support, build the first plan that builds, read its workspace, allocate it and execute.
//
// Usage: graph_v1 --op fprop|dgrad|wgrad --dtype float|half|bfloat16 --n N --c C --k K --h H --w W --r R --s S
//                 [--pad P --stride U --dil D --groups G --layout nchw|nhwc --d D --t T] --data DIR
//                 --capacity BYTES [--calls K] (the problem's options: client.h)
// The data files and the JSON output (call times included) are those of torch_v0 (client.h); exit status 0 when
// the op ran.
// Built linked to cuDNN, or with NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING to reach it through dlopen + dlsym as XLA
// does (cudnn_calls.h); the report's "loading" says which.
#include <cudnn_frontend.h>

#include <cstdio>
#include <memory>

#include "client.h"
#include "cudnn_calls.h"

namespace fe = cudnn_frontend;
using rc::Json;

namespace {

struct Failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

void check(fe::error_t e, const char *what) {
    if (e.is_bad()) throw Failure(std::string(what) + ": " + e.get_message());
}

std::shared_ptr<fe::graph::Tensor_attributes> input(fe::graph::Graph &g, const rc::Problem &p, const char *name,
                                                    int64_t uid, const std::vector<int64_t> &dims) {
    return g.tensor(
        fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dims).set_stride(p.strides(dims)));
}

void output(const std::shared_ptr<fe::graph::Tensor_attributes> &t, const rc::Problem &p, int64_t uid,
            const std::vector<int64_t> &dims) {
    t->set_output(true).set_uid(uid).set_dim(dims).set_stride(p.strides(dims));
}

int run(int argc, char **argv) {
    rc::Args args(argc, argv);
    rc::Problem p = rc::Problem::from(args);
    if (p.op == rc::Op::fused) throw std::invalid_argument("--op: graph_v1 runs fprop, dgrad or wgrad");
    std::string dir = args.str("data");
    rc::CachingAllocator alloc(args.num("capacity"));
    int64_t calls = args.num("calls", "1");
    rc::Buffer x = rc::read_file(dir + "/x.bin", rc::Problem::count(p.xdim) * p.elem);
    rc::Buffer w = rc::read_file(dir + "/w.bin", rc::Problem::count(p.wdim) * p.elem);
    rc::Buffer y = rc::read_file(dir + "/y.bin", rc::Problem::count(p.ydim) * p.elem);

    Json out;
    out.field("program", "graph_v1").field("op", p.op_name).field("loading", rc::cudnn::loading);
    rc::cudnn::open();
    cudnnHandle_t handle = nullptr;
    if (rc::cudnn::create(&handle) != CUDNN_STATUS_SUCCESS) throw Failure("cudnnCreate failed");
    int64_t executed = 0;
    try {
        fe::graph::Graph g;
        g.set_io_data_type(p.dtype == 2   ? fe::DataType_t::HALF
                            : p.dtype == 9 ? fe::DataType_t::BFLOAT16
                                           : fe::DataType_t::FLOAT)
            .set_intermediate_data_type(fe::DataType_t::FLOAT)
            .set_compute_data_type(fe::DataType_t::FLOAT);
        const std::vector<int64_t> &pad = p.pad, &stride = p.stride, &dil = p.dil;
        if (p.op == rc::Op::fprop) {
            auto X = input(g, p, "x", 'x', p.xdim), W = input(g, p, "w", 'w', p.wdim);
            auto attrs = fe::graph::Conv_fprop_attributes().set_padding(pad).set_stride(stride).set_dilation(dil);
            output(g.conv_fprop(X, W, attrs), p, 'y', p.ydim);
        } else if (p.op == rc::Op::dgrad) {
            auto DY = input(g, p, "dy", 'y', p.ydim), W = input(g, p, "w", 'w', p.wdim);
            auto attrs = fe::graph::Conv_dgrad_attributes().set_padding(pad).set_stride(stride).set_dilation(dil);
            output(g.conv_dgrad(DY, W, attrs), p, 'x', p.xdim);
        } else {
            auto DY = input(g, p, "dy", 'y', p.ydim), X = input(g, p, "x", 'x', p.xdim);
            auto attrs = fe::graph::Conv_wgrad_attributes().set_padding(pad).set_stride(stride).set_dilation(dil);
            output(g.conv_wgrad(DY, X, attrs), p, 'w', p.wdim);
        }
        check(g.validate(), "validate");
        check(g.build_operation_graph(handle), "build_operation_graph");
        check(g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}), "create_execution_plans");
        out.field("configs", g.get_execution_plan_count());
        g.deselect_workspace_greater_than(alloc.largest_free_block());
        check(g.check_support(handle), "check_support");
        check(g.build_plans(handle, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE), "build_plans");
        std::string name;
        check(g.get_plan_name(name), "get_plan_name");
        int64_t ws = 0;
        check(g.get_workspace_size(ws), "get_workspace_size");
        out.field("engine", name).field("workspace", ws);
        std::unordered_map<int64_t, void *> pack = {{'x', x.get()}, {'w', w.get()}, {'y', y.get()}};
        std::vector<double> wall_ms, model_ms;  // every call after the first
        for (; executed < calls; executed++) {
            rc::CallTimer timer;
            auto block = alloc.allocate(ws);
            check(g.execute(handle, pack, block.get()), "execute");
            if (executed) timer.stop(wall_ms, model_ms);
        }
        rc::CallTimer::report(out, wall_ms, model_ms);
        out.field("status", "ok");
        const rc::Buffer &result = p.output_role() == 'x' ? x : p.output_role() == 'w' ? w : y;
        out.raw("checksum", rc::checksum(result, p.dtype));
        rc::write_file(dir + "/out.bin", result);
    } catch (Failure &e) {
        out.field("status", "error").field("error", e.what());
    } catch (rc::OutOfMemory &e) {
        out.field("status", "error").field("error", e.what());
    }
    out.field("calls", executed).field("allocator_peak", alloc.peak());
    rc::cudnn::destroy(handle);
    std::printf("%s\n", out.str().c_str());
    return executed ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) { return rc::guarded_main("graph_v1", argc, argv, run); }
