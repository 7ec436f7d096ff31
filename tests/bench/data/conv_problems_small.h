// A small file in the shape of DeepBench's code/kernels/conv_problems.h, written for ucudnn's tests:
// vectors of 11-tuples (w, h, c, n, k, filter_w, filter_h, pad_w, pad_h, wstride, hstride).
#include <tuple>
#include <vector>

std::vector<std::tuple<unsigned int, unsigned int, unsigned int, unsigned int,
                       unsigned int, unsigned int, unsigned int, unsigned int,
                       unsigned int, unsigned int, unsigned int>> training_set = {
    // DeepSpeech
    std::make_tuple(700, 161, 1, 4, 32, 20, 5, 0, 0, 2, 2),
    std::make_tuple(341, 79, 32, 4, 32,
                    10, 5, 0, 0, 2, 2),   /* split over two lines */
    // Vision
    std::make_tuple(112, 112, 64, 8, 128, 3, 3, 1, 1, 1, 1), // ResNet-ish
    /* a disabled row: std::make_tuple(1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1), */
    std::make_tuple(56u, 56u, 128u, 8u, 256u, 1u, 1u, 0u, 0u, 2u, 2u),
};

std::vector<std::tuple<unsigned int, unsigned int, unsigned int, unsigned int,
                       unsigned int, unsigned int, unsigned int, unsigned int,
                       unsigned int, unsigned int, unsigned int>> inference_server_set = {
    // Speaker ID
    std::make_tuple(80, 80, 1, 1, 64, 5, 5, 1, 1, 2, 2)
};

std::vector<std::tuple<unsigned int, unsigned int, unsigned int, unsigned int,
                       unsigned int, unsigned int, unsigned int, unsigned int,
                       unsigned int, unsigned int, unsigned int>> inference_device_set = {
    std::make_tuple(112, 112, 64, 1, 64, 1, 1, 0, 0, 1, 1),
    std::make_tuple(56, 56, 64, 1, 256, 1, 1, 0, 0, 1, 1),
};
