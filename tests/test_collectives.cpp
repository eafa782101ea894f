// Collectives across ranks: matching, clock alignment, the collective model, overlap-comm.
// PyTorch profiler (Kineto) import, multi-rank traces and collectives.
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <deque>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unistd.h>

#include "helpers.hpp"
#include "sim/base/error.hpp"
#include "traces/collectives.hpp"
#include "traces/importer.hpp"
#include "traces/kineto/kineto_importer.hpp"
#include "models/collective.hpp"
#include "tools/views/replay_view.hpp"
#include "tools/views/whatif_view.hpp"

using namespace bneck;
using namespace bneck::test;

TEST_CASE("two ranks joined by an all-reduce: the collective ends when the last rank arrived", "[kineto][collectives]") {
  // Rank 0 computes 1 ms, rank 1 3 ms; the all-reduce moves data for 0.5 ms after rank 1 arrives at
  // 3.010 ms, so both end at 3.510 ms and rank 0 waits 2 ms inside its NCCL kernel.
  std::string r0 = rank_trace(0, 1000, 3510), r1 = rank_trace(1, 3000, 3510);
  Trace t = load_traces({r0, r1});
  REQUIRE(t.processes.size() == 2);
  REQUIRE(t.collectives.size() == 1);
  const Collective& c = t.collectives[0];
  CHECK(c.kind == CollKind::AllReduce);
  CHECK(c.bytes == 4 * 1048576);  // In msg nelems x 4-byte Float
  CHECK(c.group_size == 2);
  CHECK(c.members.size() == 2);
  ReplayReport rep = run_replay(t, ReplayOptions{});
  REQUIRE(rep.simulated_ranks.size() == 2);
  for (int r = 0; r < 2; ++r) {
    CHECK(rep.measured_ranks[r].span.length() == 3'500'000);  // 10 us .. 3.510 ms
    CHECK(rep.simulated_ranks[r].span.length() == 3'500'000);
  }
  CHECK(rep.simulated_ranks[0].waited_ns == 2'000'000);  // arrived at 1.010 ms, the last at 3.010 ms
  CHECK(rep.simulated_ranks[1].last_arrivals == 1);
  REQUIRE(rep.waits.size() == 1);
  CHECK(rep.waits[0].straggler == 1);
  // The critical path crosses from rank 0's all-reduce to rank 1's GEMM.
  std::set<std::uint32_t> ranks;
  for (OpId o : rep.critical_path) ranks.insert(t.rank_of(t.ops[o]));
  CHECK(ranks.size() == 2);
  // What if rank 1's GEMM ran 3x faster (1 ms)? Both arrive at 1.010 ms and end at 1.510 ms; rank 0's
  // 2 ms of waiting disappears. Amdahl on summed device time would promise less.
  WhatIfOptions wo;
  wo.transforms = {parse_transform("scale", "3:name~gemm_rank1")};
  WhatIfReport w = run_whatif(t, wo);
  CHECK(w.baseline.length() == 3'500'000);
  CHECK(w.predicted.length() == 1'500'000);
  // --scale on collectives halves the part after the last arrival: 3.010 + 0.25 ms.
  wo.transforms = {parse_transform("scale", "2:kind=collective")};
  CHECK(run_whatif(t, wo).predicted.length() == 3'250'000);
  // What if the same step ran on 8 ranks (weak scaling)? Only the 0.5 ms after the last arrival
  // scales, by the collective model's 8-rank over 2-rank time for the 4 MiB all-reduce: the span is
  // 3.0 ms (to the arrival) + 0.5 ms x t8 / t2.
  wo.transforms = {parse_transform("ranks", "8")};
  WhatIfReport w8 = run_whatif(t, wo);
  HwSpec h = load_target_hw("h200-sxm");
  double t2 = static_cast<double>(collective_time(h, CollKind::AllReduce, 4 << 20, 2).time_ns);
  double t8 = static_cast<double>(collective_time(h, CollKind::AllReduce, 4 << 20, 8).time_ns);
  CHECK(t8 > t2);
  CHECK(static_cast<double>(w8.predicted.length()) == Approx(3'000'000 + 500'000 * t8 / t2).margin(2));
  std::remove(r0.c_str());
  std::remove(r1.c_str());
}

TEST_CASE("one rank's file of a larger job: its collectives ran on the job's ranks (distributedInfo)", "[kineto][collectives]") {
  // Rank 0 of the two-rank trace above, its record_param_comms (which names the group) taken out
  // and its distributedInfo saying world_size 8: the all-reduce ran on 8 ranks, though the file
  // holds one member. --ranks 2 re-times its kernel (10 us .. 1.010 ms GEMM, all-reduce 1.010 ..
  // 3.510 ms) by the model's 2-rank over 8-rank time: span = 1.0 ms + 2.5 ms x t2 / t8. Taken for a
  // one-rank group, the same kernel was re-timed by t2 / t1 (t1: no transfer at all), hundreds of
  // times its length.
  const std::string r0 = rank_trace(0, 1000, 3510);
  nlohmann::json j = nlohmann::json::parse(std::ifstream(r0));
  auto& ev = j["traceEvents"];
  for (auto it = ev.begin(); it != ev.end();) it = (*it)["name"] == "record_param_comms" ? ev.erase(it) : it + 1;
  j["distributedInfo"]["world_size"] = 8;
  std::ofstream(r0) << j.dump();
  Trace t = load_traces({r0});
  REQUIRE(t.collectives.size() == 1);
  CHECK(t.collectives[0].ranks() == 8);
  CHECK(t.processes[0].world_size == 8);
  WhatIfOptions wo;
  wo.transforms = {parse_transform("ranks", "2")};
  const WhatIfReport w = run_whatif(t, wo);
  // Without record_param_comms the message size is unknown (0 bytes): the ratio is the ring's
  // latency terms', 2 x (2 - 1) steps over 2 x (8 - 1): 1/7, span 1.0 + 2.5 / 7 ms.
  CHECK(t.collectives[0].bytes == 0);
  HwSpec h = load_target_hw("h200-sxm");
  const double t2 = static_cast<double>(collective_time(h, CollKind::AllReduce, 0, 2).time_ns);
  const double t8 = static_cast<double>(collective_time(h, CollKind::AllReduce, 0, 8).time_ns);
  REQUIRE(t8 > t2);
  CHECK(static_cast<double>(w.predicted.length()) == Approx(1'000'000 + 2'500'000 * t2 / t8).margin(2));
  std::remove(r0.c_str());
}

TEST_CASE("overlap-comm what-if: an all-reduce launched late starts when its input is ready", "[kineto][collectives][whatif]") {
  // Both ranks: a 1 ms GEMM (10 us .. 1.010 ms), then the host launches the all-reduce on its own
  // stream at 2 ms; it starts at 2.010 ms and moves data for 0.5 ms: 2.510 ms. Started when its
  // input (the GEMM) is ready instead, it runs 1.010 .. 1.510 ms: the span drops from 2.5 to 1.5 ms.
  std::string r0 = rank_trace(0, 1000, 2510, 20, 2000), r1 = rank_trace(1, 1000, 2510, 20, 2000);
  Trace t = load_traces({r0, r1});
  REQUIRE(t.collectives.size() == 1);
  WhatIfOptions wo;
  wo.transforms = {parse_transform("overlap-comm", "")};
  wo.unprofile = false;  // hand-written Kineto files: no profiler's cost in their host times
  WhatIfReport w = run_whatif(t, wo);
  CHECK(w.baseline.length() == 2'500'000);
  CHECK(w.predicted.length() == 1'500'000);
  // A faster link (the collective model's hybrid ratio) only shortens the 0.5 ms after arrival.
  std::remove(r0.c_str());
  std::remove(r1.c_str());
}

TEST_CASE("collective model: nccl-tests' bus factors and the alpha-beta time", "[models][collectives]") {
  // nccl-tests: busbw = algbw x 2(n-1)/n for AllReduce, (n-1)/n for AllGather, 1 for Broadcast.
  CHECK(bus_factor(CollKind::AllReduce, 8) == Approx(1.75));
  CHECK(bus_factor(CollKind::AllGather, 8) == Approx(0.875));
  CHECK(bus_factor(CollKind::Broadcast, 8) == Approx(1.0));
  HwSpec h = load_hw("h100-sxm");  // NVLink 450 GB/s per GPU and direction, 2 us per step, 8 GPUs a node
  // 1 GiB AllReduce on 8 ranks, ring: 14 steps x 2 us = 28 us, + 1.75 x 1073741824 B / 450 GB/s =
  // 4.175600 ms, + the kernel tail.
  CollectiveEstimate e = collective_time(h, CollKind::AllReduce, 1ull << 30, 8);
  CHECK(e.algorithm == "ring");
  CHECK(e.link == "nvlink");
  CHECK(e.time_ns == Approx(28'000 + 4'175'662 + h.gpu.kernel_tail).margin(2));
  // 8 bytes: latency-bound; tree: 2 x log2(8) = 6 steps x 2 us = 12 us beats the ring's 28 us.
  CollectiveEstimate s = collective_time(h, CollKind::AllReduce, 8, 8);
  CHECK(s.algorithm == "tree");
  CHECK(s.latency_ns == 12'000);
  // 16 ranks do not fit in a node of 8: the NIC (50 GB/s, 5 us) bounds the ring.
  CollectiveEstimate x = collective_time(h, CollKind::AllGather, 1ull << 30, 16);
  CHECK(x.link == "nic");
  CHECK(x.link_bandwidth == Approx(50e9));
}

TEST_CASE("ranks traced on different clocks are aligned on their collectives", "[kineto][collectives]") {
  // Three all-reduces per rank; rank 1's clock runs 5 s ahead. Each all-reduce k: both ranks launch at
  // 1000 k us, rank 0's starts at 1000 k + 10 us, rank 1's at 1000 k + 210 us (it computes longer),
  // both end at 1000 k + 700 us on the true clock.
  auto make = [&](int rank, double shift_us) {
    nlohmann::json ev = nlohmann::json::array();
    for (int k = 0; k < 3; ++k) {
      double t0 = 1000.0 * k + shift_us, start = t0 + (rank ? 210 : 10), end = t0 + 700;
      ev.push_back({{"ph", "X"},
                    {"cat", "cuda_runtime"},
                    {"name", "cudaLaunchKernel"},
                    {"pid", 1 + rank},
                    {"tid", 1},
                    {"ts", t0},
                    {"dur", 5},
                    {"args", {{"correlation", k + 1}}}});
      ev.push_back({{"ph", "X"},
                    {"cat", "kernel"},
                    {"name", "ncclKernel_AllReduce_RING_LL_Sum_float"},
                    {"pid", 0},
                    {"tid", 20},
                    {"ts", start},
                    {"dur", end - start},
                    {"args", {{"correlation", k + 1}, {"device", 0}, {"stream", 20}}}});
    }
    nlohmann::json j = {{"distributedInfo", {{"rank", rank}, {"world_size", 2}}}, {"traceEvents", ev}};
    std::string path = tmp("clock" + std::to_string(rank) + ".json");
    std::ofstream(path) << j.dump();
    return path;
  };
  std::string a = make(0, 0), b = make(1, 5e6);
  Trace t = load_traces({a, b});
  REQUIRE(t.collectives.size() == 3);
  CHECK(t.anomalies.count("merge: rank clocks aligned on their collectives' ends") == 1);
  ReplayReport rep = run_replay(t, ReplayOptions{});
  // Aligned: every collective waited 200 us for rank 1, and the replay reproduces the spans.
  REQUIRE(rep.waits.size() == 3);
  for (const auto& w : rep.waits) {
    CHECK(w.straggler == 1);
    CHECK(w.arrival_spread_ns == 200'000);
  }
  CHECK(rep.simulated.length() == rep.measured.length());
  CHECK(rep.measured.length() == 2'690'000);  // 10 us .. 2700 us
  std::remove(a.c_str());
  std::remove(b.c_str());
}

TEST_CASE("the 8-rank DLRM step: every rank's span within 2 %, all collectives matched", "[kineto][extended][collectives]") {
  Trace t = load_traces({extra_dir() + "/traces/kineto/param_dlrm_8rank_v100/dlrm_kineto"});
  REQUIRE(t.processes.size() == 8);
  // Per rank 5 all_to_all (SendRecv kernels) and 3 all_reduce: 8 collectives of 8 members.
  REQUIRE(t.collectives.size() == 8);
  std::map<CollKind, int> kinds;
  for (const auto& c : t.collectives) {
    CHECK(c.members.size() == 8);
    kinds[c.kind]++;
    CHECK(c.bytes > 0);
  }
  CHECK(kinds[CollKind::AllToAll] == 5);
  CHECK(kinds[CollKind::AllReduce] == 3);
  ReplayReport rep = run_replay(t, ReplayOptions{});
  REQUIRE(rep.simulated_ranks.size() == 8);
  for (std::size_t r = 0; r < 8; ++r) {
    INFO("rank " << r);
    const auto& m = rep.measured_ranks[r];
    const auto& s = rep.simulated_ranks[r];
    CHECK(m.rank == r);
    CHECK(std::fabs(static_cast<double>(s.span.length() - m.span.length())) <= 0.02 * static_cast<double>(m.span.length()));
    CHECK(s.collectives == 8);
    CHECK(s.overlap.communication_ns > 0);
    CHECK(s.overlap.compute_ns > 0);
    CHECK(s.overlap.exposed_communication_ns <= s.overlap.communication_ns);
  }
  // The spans the README lists: 13-20 ms per rank.
  CHECK(rep.measured_ranks[0].span.length() == 13'009'000);
  // The critical path runs through a collective into the rank everyone waited for.
  std::set<std::uint32_t> ranks;
  for (OpId o : rep.critical_path) ranks.insert(t.rank_of(t.ops[o]));
  CHECK(ranks.size() >= 2);
}
