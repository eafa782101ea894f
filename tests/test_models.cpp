// Cost models: every expected number is computed by hand in the comment beside it.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "models/access.hpp"
#include "models/kernel_work.hpp"
#include "models/occupancy.hpp"
#include "models/retarget.hpp"
#include "models/roofline.hpp"
#include "models/transfer.hpp"
#include "tools/views/replay_view.hpp"
#include <cmath>
#include "sim/base/error.hpp"

using namespace bneck;
using namespace bneck::test;

TEST_CASE("roofline on the text's teaching device", "[models][roofline]") {
  // 120 TFLOP/s over 2 TB/s: the ridge is 60 FLOP/byte. FP32 vector addition does 1 FLOP per
  // 12 bytes (two 4-byte loads, one store), so it attains 2e12 / 12 = 0.1667 TFLOP/s.
  HwSpec h = load_hw("hypothetical-120tf-2tbs");
  RooflineResult r = roofline(h.gpu, {Dtype::FP32, ComputeUnit::Simt, 1e9, 12e9, MemLevel::Hbm, false, -1, -1});
  CHECK(r.ridge_flop_per_byte == Approx(60));
  CHECK(r.attainable_flop_per_s == Approx(0.16667e12).epsilon(1e-4));
  CHECK(r.bound == Bound::Memory);
  CHECK(r.time_ns == 6'000'000);  // 12e9 bytes at 2 TB/s = 6 ms
  // At 120 FLOP/byte it is compute-bound: 120e9 FLOPs take 1 ms.
  RooflineResult c = roofline(h.gpu, {Dtype::FP32, ComputeUnit::Simt, 120e9, 1e9, MemLevel::Hbm, false, -1, -1});
  CHECK(c.bound == Bound::Compute);
  CHECK(c.time_ns == 1'000'000);
}

TEST_CASE("coalescing counts 32-byte sectors", "[models][coalescing]") {
  // 32 neighbouring floats: 128 bytes = 4 sectors, all used.
  Coalescing a = coalesce(4, 1);
  CHECK(a.sectors_per_request == 4);
  CHECK(a.bytes_moved == 128);
  CHECK(a.efficiency == Approx(1.0));
  // Stride of 8 floats = 32 bytes: every thread in its own sector, 32 sectors, 1/8 used.
  Coalescing b = coalesce(4, 8);
  CHECK(b.sectors_per_request == 32);
  CHECK(b.efficiency == Approx(0.125));
  // Stride 2: 256 bytes spanned, 8 sectors, half used. 8-byte elements, stride 1: 8 sectors.
  CHECK(coalesce(4, 2).sectors_per_request == 8);
  CHECK(coalesce(8, 1).sectors_per_request == 8);
}

TEST_CASE("tiling intensity and Amdahl's law", "[models]") {
  // A square FP32 tile of width b: 2b^2 FLOPs per 2b * 4 bytes = b / 4.
  CHECK(tile_flop_per_byte(16, 4) == Approx(4));
  CHECK(tile_flop_per_byte(128, 4) == Approx(32));
  CHECK(tile_flop_per_byte(128, 2) == Approx(64));  // bf16: b / 2
  // A 5 ms kernel 3x faster in a 100 ms serial run: 100 * (0.95 + 0.05 / 3) = 96.667 ms, 3.33 ms saved.
  CHECK(100.0 / amdahl_speedup(0.05, 3) == Approx(96.6667).epsilon(1e-5));
  // Removing it leaves 95 ms.
  CHECK(100.0 / amdahl_speedup(0.05, 0) == Approx(95.0));
}

TEST_CASE("occupancy as the calculator computes it", "[models][occupancy]") {
  HwSpec h = load_hw("h200-sxm");
  // 256 threads (8 warps), 64 registers: 2048 registers a warp, 65536 / 2048 = 32 warps = 4 blocks.
  // 48 KiB + 1 KiB reserved = 50176 bytes a block: 233472 / 50176 = 4 blocks. 4 blocks = 32 warps = 50 %.
  OccupancyResult r = occupancy(h.gpu, {256, 64, 48 * 1024});
  CHECK(r.blocks_per_sm == 4);
  CHECK(r.warps_per_sm == 32);
  CHECK(r.occupancy == Approx(0.5));
  CHECK(r.by_registers == 4);
  CHECK(r.by_shared_memory == 4);
  // 1024 threads at 32 registers: 2 blocks by warps (64 / 32); 255 registers x 1024 threads does not fit.
  CHECK(occupancy(h.gpu, {1024, 32, 0}).blocks_per_sm == 2);
  CHECK(occupancy(h.gpu, {1024, 255, 0}).blocks_per_sm == 0);
  // 32 threads (1 warp), 16 registers: 64 blocks would fit by warps, the block limit allows 32.
  OccupancyResult s = occupancy(h.gpu, {32, 16, 0});
  CHECK(s.blocks_per_sm == 32);
  CHECK(s.by_warps == 64);
  CHECK(s.limiter == "blocks");
  CHECK(s.occupancy == Approx(0.5));
}

TEST_CASE("occupancy equals the CUDA occupancy API on an H200", "[models][occupancy]") {
  // validate/reference/h200/occupancy.json: cudaOccupancyMaxActiveBlocksPerMultiprocessor for
  // kernels of 10..255 registers, 32..1024 threads, 0..227 KiB of dynamic shared memory.
  std::ifstream in(source_dir() + "/validate/reference/h200/occupancy.json");
  REQUIRE(in);
  auto j = nlohmann::json::parse(in);
  HwSpec h = load_hw("h200-sxm");
  CHECK(j["smem_per_sm"].get<Bytes>() == h.gpu.shared_memory_per_sm);
  CHECK(j["reserved_smem_per_block"].get<Bytes>() == h.gpu.reserved_shared_memory_per_block);
  std::size_t rows = 0, equal = 0;
  for (const auto& r : j["rows"]) {
    OccupancyInput q{r["threads"].get<std::uint32_t>(), r["regs"].get<std::uint32_t>(),
                     r["static_smem"].get<Bytes>() + r["dynamic_smem"].get<Bytes>()};
    OccupancyResult o = occupancy(h.gpu, q);
    ++rows;
    if (o.blocks_per_sm == r["blocks_per_sm"].get<std::uint32_t>())
      ++equal;
    else
      INFO(r.dump() << " bneck: " << o.blocks_per_sm << " (" << o.limiter << ")");
    CHECK(o.blocks_per_sm == r["blocks_per_sm"].get<std::uint32_t>());
  }
  CHECK(rows > 1000);
  CHECK(equal == rows);
}

TEST_CASE("wave quantization", "[models]") {
  // 132 SMs, 1 block each: 264 blocks are 2 full waves; 133 blocks also take 2 waves, 133/264 used.
  Waves a = wave_quantization(264, 1, 132);
  CHECK(a.waves == 2);
  CHECK(a.efficiency == Approx(1.0));
  Waves b = wave_quantization(133, 1, 132);
  CHECK(b.waves == 2);
  CHECK(b.efficiency == Approx(133.0 / 264));
}

TEST_CASE("transfers: latency plus bytes over the path's bandwidth", "[models][transfer]") {
  HwSpec h = load_hw("h200-sxm");
  // Pinned H2D, 256 MiB: 2 us + 268435456 B / 55 GB/s = 2 us + 4.8806 ms = 4.883 ms (measured 4.84-4.86).
  CHECK(transfer_time(h, MemcpyKind::HtoD, MemKind::Pinned, MemKind::Device, 256ull << 20) == Approx(4'882'645).epsilon(1e-5));
  // Pageable, 256 MiB: first 1 MiB at 55 GB/s (19.07 us), 255 MiB at 6.5 GB/s (41.136 ms), + 2 us = 41.158 ms (measured 40.9-41.7).
  CHECK(transfer_time(h, MemcpyKind::HtoD, MemKind::Pageable, MemKind::Device, 256ull << 20) == Approx(41'157'540).epsilon(1e-4));
  // D2D, 256 MiB: read and write, 2 x 268435456 B / (4.8 TB/s x 0.9) = 124.28 us, + 0.7 us tail.
  CHECK(transfer_time(h, MemcpyKind::DtoD, MemKind::Device, MemKind::Device, 256ull << 20) == Approx(124'976).epsilon(1e-4));
}

TEST_CASE("transfers: a calibrated curve is piecewise linear between its measured sizes", "[models][transfer]") {
  nlohmann::json j =
      nlohmann::json::parse(R"({"name": "c", "gpu": {"sm_count": 1, "memory_bandwidth": "1 TB/s", "peak": {"fp32": {"simt": "1 TFLOP/s"}}},
    "node": {"copy_paths": {"h2d_pageable": {"latency": "1 us", "bandwidth": "1 GB/s",
      "curve": [["64 KiB", "8 us"], ["1 MiB", "88 us"], ["16 MiB", "1288 us"], ["256 MiB", "41 ms"]]}}}})");
  HwSpec h = parse_hw(j, "c.json");
  auto t = [&](Bytes b) { return transfer_time(h, MemcpyKind::HtoD, MemKind::Pageable, MemKind::Device, b); };
  CHECK(t(1ull << 20) == 88'000);  // on a point
  // Between 1 MiB (88 us) and 16 MiB (1288 us): 1200 us per 15 MiB = 80 us per MiB; 4 MiB -> 88 + 3 x 80 = 328 us.
  CHECK(t(4ull << 20) == 328'000);
  // Past the last point, the last segment's rate: (41 ms - 1.288 ms) / 240 MiB = 165.47 us per MiB;
  // 1 GiB -> 41 ms + 768 x 165.4667 us = 168.078 ms.
  CHECK(t(1ull << 30) == Approx(168'078'000).epsilon(1e-5));
  // Below the first point, the first segment's line: 80 us per 960 KiB = 83.33 ns per KiB;
  // 32 KiB -> 8 us - 32 x 83.33 ns = 5.333 us, above half of 8 us.
  CHECK(t(32ull << 10) == 5'333);
  CHECK(t(0) == 4'000);  // the line would give 2.667 us; never under half the first point
  nlohmann::json bad = j;
  bad["node"]["copy_paths"]["h2d_pageable"]["curve"][2][0] = "512 KiB";
  CHECK_THROWS_WITH(parse_hw(bad, "c.json"), Catch::Contains("c.json") && Catch::Contains("curve[2]") && Catch::Contains("ascend"));
}

TEST_CASE("kernel classes, precisions and NVTX shapes", "[models][work]") {
  CHECK(classify_kernel("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT") == KernelClass::Gemm);
  CHECK(classify_kernel("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>(T1::Params)") == KernelClass::Gemm);
  CHECK(classify_kernel("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7") == KernelClass::Attention);
  CHECK(classify_kernel("void cudnn::fusion::convert_dq_to_16bits<(bool)1>(const void *)") != KernelClass::Conv);
  CHECK(classify_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096>)") == KernelClass::Communication);
  // DeepEP's all-to-all (its namespaces; dpsk::ep:: as DeepSeek's published training profile names
  // them), not its layout kernel, which computes.
  CHECK(classify_kernel("void deep_ep::internode_ll::dispatch<3, 2, 7168>(void*, float*, int*)") == KernelClass::Communication);
  CHECK(classify_kernel("void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int)") == KernelClass::Communication);
  CHECK(classify_kernel("void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>(int4*, float*)") ==
        KernelClass::Communication);
  CHECK(classify_kernel("void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*, int*)") != KernelClass::Communication);
  CHECK(classify_kernel("void at::native::vectorized_layer_norm_kernel<float, float, (bool)0>") == KernelClass::Norm);
  CHECK(classify_kernel("implicit_convolve_sgemm") == KernelClass::Conv);
  CHECK(kernel_dtype("void op_mul<__nv_bfloat16>(const T1 *, T1 *, unsigned long)") == Dtype::BF16);
  CHECK(kernel_dtype("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8") == Dtype::FP32);
  CHECK(kernel_dtype("nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN") == Dtype::BF16);
  // Tensile (rocBLAS, hipBLASLt) GEMMs on AMD GPUs, as the MI300X traces name them: the type token
  // after the index strings (BBS: bf16 in and out, fp32 compute; HHS fp16; S fp32).
  const char* tensile_bf16 = "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x192x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_CLR1";
  CHECK(classify_kernel(tensile_bf16) == KernelClass::Gemm);
  CHECK(kernel_dtype(tensile_bf16) == Dtype::BF16);
  CHECK(kernel_dtype("Cijk_Ailk_Bljk_S_B_Bias_HA_S_SAV_UserArgs_MT16x16x128_MI16x16x1_SN_LDSB1_AFC1") == Dtype::FP32);
  CHECK(kernel_dtype("Cijk_Ailk_Bljk_HHS_BH_MT128x128x32_MI32x32x8_SN") == Dtype::FP16);
  // TensorRT's tensor-core kernels name the MMA shape after the input type (h: fp16, i: int8).
  CHECK(kernel_dtype("trt_ampere_h16816gemm_64x64_ldg8_relu_stages_64x5_tn_v1") == Dtype::FP16);
  CHECK(kernel_dtype("trt_turing_h1688cudnn_256x128_ldg8_relu_exp_small_nhwc_tn_v1") == Dtype::FP16);
  CHECK(kernel_dtype("trt_ampere_i16832gemm_int8_128x128_ldg16_relu_stages_64x3_t1r1s1") == Dtype::INT8);
  CHECK(kernel_dtype("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma") == Dtype::FP32);
  auto sz = parse_nvtx_sizes("aten::addmm, seq = 3, op_id = 9, sizes = [[6144], [8192, 2048], [2048, 6144]], input_op_ids = [(0,-1)]");
  REQUIRE(sz.size() == 3);
  CHECK(sz[0] == std::vector<std::int64_t>{6144});
  CHECK(sz[2] == std::vector<std::int64_t>{2048, 6144});
  CHECK(parse_nvtx_sizes("aten::empty, sizes = [[], []]").size() == 2);
  CHECK(parse_nvtx_sizes("iter0").empty());
}

TEST_CASE("work from recorded shapes: the QKV projection of block_bf16", "[models][work]") {
  // aten::addmm [[6144], [8192, 2048], [2048, 6144]]: 2 x 8192 x 2048 x 6144 = 206.16 GFLOP.
  Trace t = load_trace(core("block_bf16.sqlite"));
  auto work = estimate_work(t, load_hw("h200-sxm"));
  std::size_t found = 0;
  for (OpId i = 0; i < t.ops.size(); ++i)
    if (work[i].from_shapes && work[i].op == "aten::addmm" && work[i].flops == Approx(2.0 * 8192 * 2048 * 6144)) ++found;
  CHECK(found >= 10);  // 2 blocks x 5 steps
}

TEST_CASE("a paged KV cache's write is a copy whose work its pool's shape does not give", "[models][work]") {
  // vLLM's reshape_and_cache_flash (the B200 profile of thirdparty/tracelens): 888 tokens' keys and
  // values written into a pool of 4,213,816 blocks of 16 x 1 x 64. The pool's shape is no measure of
  // the 113 kB written: its work comes from its 10 us (inferred, not from shapes; it was 466 GB,
  // 7,418 % of the B200's bandwidth for its class), and "flash" in its name is no attention.
  const std::string p = tmp("kv_cache_write.json");
  std::ofstream(p) << R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "_C_cache_ops::reshape_and_cache_flash", "pid": 1, "tid": 1, "ts": 10, "dur": 20,
     "args": {"Input Dims": [[888, 1, 64], [888, 1, 64], [4213816, 16, 1, 64], [4213816, 16, 1, 64], [888], [], [], []],
              "Input type": ["c10::BFloat16", "c10::BFloat16", "unsigned char", "unsigned char", "long int", "", "", ""]}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 12, "dur": 5, "args": {"correlation": 1}},
    {"ph": "X", "cat": "kernel", "name": "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, unsigned char, (vllm::Fp8KVCacheDataType)1>",
     "pid": 0, "tid": 7, "ts": 30, "dur": 10, "args": {"correlation": 1, "stream": 7, "device": 0, "grid": [888, 1, 1], "block": [128, 1, 1]}}],
    "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "numSms": 132, "computeMajor": 9, "computeMinor": 0}]})";
  CHECK(classify_kernel("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, unsigned char, (vllm::Fp8KVCacheDataType)1>") ==
        KernelClass::Copy);
  const Trace t = load_trace(p);
  const WorkTable work = estimate_work(t, load_hw("h200-sxm"));
  std::size_t kernels = 0;
  for (OpId i = 0; i < t.ops.size(); ++i)
    if (t.ops[i].kind == OpKind::Kernel) {
      ++kernels;
      CHECK(work[i].cls == KernelClass::Copy);
      CHECK_FALSE(work[i].from_shapes);
      CHECK(work[i].bytes < 1e8);  // what 10 us at the H200's bandwidth moves, not the pool's 466 GB
    }
  CHECK(kernels == 1);
  std::remove(p.c_str());
}

TEST_CASE("a convolution's work from its shapes and the stride, padding and dilation Kineto records", "[models][work]") {
  // Three ops, one kernel each:
  // 1. aten::cudnn_convolution x [64, 64, 56, 56], w [64, 64, 3, 3], padding 1, stride 1: the output
  //    is 56 x 56, 2 x 64 x 64 x 3136 x (64 x 9) = 14.80 GFLOP; bytes (x + w + out) x 4 =
  //    (12,845,056 + 36,864 + 12,845,056) x 4 = 102.9 MB; the weight's 36,864 elements (a cast's).
  // 2. stride 2 on x [8, 16, 33, 33], w [32, 16, 3, 3], padding 1: (33 + 2 - 2 - 1) / 2 + 1 = 17,
  //    2 x 8 x 32 x 289 x 144 = 21.31 MFLOP.
  // 3. aten::convolution_backward, grad_output [8, 32, 17, 17], output_mask [False, True, True] (the
  //    network's first layer: no input gradient): the weight's gradient only, 21.31 MFLOP again.
  // The same first op without its recorded arguments (a profile of PyTorch before 2.1, Nsight's
  // NVTX shapes) cannot size its output: its work is inferred from its duration.
  const std::string p = tmp("conv_work.json");
  auto op = [](const char* name, double ts, const char* dims, const char* concrete, int corr) {
    std::string e = R"({"ph": "X", "cat": "cpu_op", "name": ")" + std::string(name) + R"(", "pid": 1, "tid": 1, "ts": )" +
                    std::to_string(ts) + R"(, "dur": 20, "args": {"Input Dims": )" + dims;
    if (concrete[0]) e += std::string(R"(, "Concrete Inputs": )") + concrete;
    e += "}},\n";
    e += R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": )" + std::to_string(ts + 2) +
         R"(, "dur": 5, "args": {"correlation": )" + std::to_string(corr) + "}},\n";
    e +=
        R"({"ph": "X", "cat": "kernel", "name": "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc", "pid": 0, "tid": 7, "ts": )" +
        std::to_string(ts + 10) + R"(, "dur": 100, "args": {"correlation": )" + std::to_string(corr) +
        R"(, "stream": 7, "device": 0, "grid": [132, 1, 1], "block": [256, 1, 1]}})";
    return e;
  };
  std::ofstream(p) << R"({"traceEvents": [)"
                   << op("aten::cudnn_convolution", 0, "[[64, 64, 56, 56], [64, 64, 3, 3], [], [], [], [], [], [], []]",
                         R"(["", "", "[1, 1]", "[1, 1]", "[1, 1]", "1", "False", "False", "True"])", 1)
                   << ",\n"
                   << op("aten::cudnn_convolution", 200, "[[8, 16, 33, 33], [32, 16, 3, 3], [], [], [], [], [], [], []]",
                         R"(["", "", "[1, 1]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"])", 2)
                   << ",\n"
                   << op("aten::convolution_backward", 400,
                         "[[8, 32, 17, 17], [8, 16, 33, 33], [32, 16, 3, 3], [], [], [], [], [], [], [], []]",
                         R"(["", "", "", "[0]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", "[False, True, True]"])", 3)
                   << ",\n"
                   << op("aten::cudnn_convolution", 600, "[[64, 64, 56, 56], [64, 64, 3, 3], [], [], [], [], [], [], []]", "", 4) << R"(],
    "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "numSms": 132, "computeMajor": 9, "computeMinor": 0}]})";
  const Trace t = load_trace(p);
  const WorkTable work = estimate_work(t, load_hw("h200-sxm"));
  std::vector<KernelWork> k;
  for (OpId i = 0; i < t.ops.size(); ++i)
    if (t.ops[i].kind == OpKind::Kernel) k.push_back(work[i]);
  REQUIRE(k.size() == 4);
  CHECK(k[0].cls == KernelClass::Conv);
  CHECK(k[0].from_shapes);
  CHECK(k[0].flops == Approx(2.0 * 64 * 64 * 3136 * 576));
  CHECK(k[0].bytes == Approx(102'907'904));
  CHECK(k[0].weight_elems == Approx(36'864));
  CHECK(k[1].flops == Approx(2.0 * 8 * 32 * 289 * 144));
  CHECK(k[2].from_shapes);
  CHECK(k[2].flops == Approx(2.0 * 8 * 32 * 289 * 144));
  CHECK_FALSE(k[3].from_shapes);
  std::remove(p.c_str());
}

TEST_CASE("the work table keeps shared work once and each inferred amount apart", "[models][work]") {
  // Four ops: an API call (default work), two GEMMs whose flops were inferred from their durations
  // (one template, two amounts), a kernel of known shapes (a template of its own).
  WorkTable w(4);
  KernelWork g;
  g.cls = KernelClass::Gemm;
  g.dtype = Dtype::BF16;
  g.flops = 3e9;
  w.set(1, g);
  g.flops = 5e9;
  w.set(2, g);
  KernelWork e;
  e.cls = KernelClass::Elementwise;
  e.from_shapes = true;
  e.bytes = 4096;
  e.op = op_name_of("aten::add");
  w.set(3, e);
  CHECK(w.size() == 4);
  CHECK(w.templates() == 3);  // the default, the GEMM (amount apart), the elementwise op
  CHECK(w[0].cls == KernelClass::Other);
  CHECK(w[0].flops == 0);
  CHECK(w[0].bytes == 0);
  CHECK(w[1].flops == 3e9);
  CHECK(w[2].flops == 5e9);
  CHECK(w[2].dtype == Dtype::BF16);
  CHECK(w[3].bytes == 4096);
  CHECK(w[3].op == "aten::add");
  // A streaming kernel's inferred amount is its bytes; the same bytes again share its template.
  KernelWork m;
  m.cls = KernelClass::Elementwise;
  m.bytes = 1e6;
  w.set(0, m);
  CHECK(w[0].bytes == 1e6);
  CHECK(w[0].flops == 0);
  CHECK(w.templates() == 4);
  // A trace's table: as many entries as ops, far fewer templates (block_bf16: 2 blocks x 5 steps).
  Trace t = load_trace(core("block_bf16.sqlite"));
  const WorkTable work = estimate_work(t, load_hw("h200-sxm"));
  CHECK(work.size() == t.ops.size());
  CHECK(work.templates() * 10 < t.ops.size());
}

TEST_CASE("retargeting H200 -> H100 SXM follows the specs", "[models][retarget]") {
  // Same GH100 compute (132 SMs, same peaks), 3.35 instead of 4.8 TB/s: a compute-bound GEMM keeps
  // its time, a memory-bound kernel takes 4.8 / 3.35 = 1.433x longer (same efficiency).
  Trace t = load_trace(core("block_bf16.sqlite"));
  RetargetCostModel m(t, load_hw("h200-sxm"), load_hw("h100-sxm"), DurationMode::Hybrid);
  std::size_t gemms = 0, memory = 0;
  for (OpId i = 0; i < t.ops.size(); ++i) {
    const Op& o = t.ops[i];
    if (o.kind != OpKind::Kernel || o.duration() < 50'000) continue;
    const KernelWork& w = m.work()[i];
    KernelEstimate e = model_kernel(t, i, w, m.target());
    double ratio = static_cast<double>(m.device_time(i)) / static_cast<double>(o.duration());
    if (w.cls == KernelClass::Gemm && e.bound == Bound::Compute) {
      CHECK(ratio == Approx(1.0).epsilon(1e-3));
      ++gemms;
    } else if (e.bound == Bound::Memory && w.flops == 0) {
      double tail = 700, d = static_cast<double>(o.duration());
      CHECK(ratio == Approx(((d - tail) * 4.8 / 3.35 + tail) / d).epsilon(2e-3));
      ++memory;
    }
  }
  CHECK(gemms > 50);
  CHECK(memory > 10);
}

TEST_CASE("model-mode replay of the block traces stays within 15 % of measured", "[models][e2e]") {
  for (const char* f : {"block_fp32.sqlite", "block_bf16.sqlite"}) {
    INFO(f);
    Trace t = load_trace(core(f));
    ReplayOptions opt;
    opt.range_regex = "step.*";
    opt.durations = "model";
    opt.durations_explicit = true;
    ReplayReport rep = run_replay(t, opt);
    REQUIRE(rep.ranges.size() == 5);
    for (const auto& r : rep.ranges) {
      double e = std::fabs(static_cast<double>(r.simulated_span_ns - r.measured_span_ns)) / static_cast<double>(r.measured_span_ns);
      INFO(r.name << " measured " << r.measured_span_ns << " model " << r.simulated_span_ns);
      CHECK(e <= 0.15);
    }
  }
}
