#include "sim/analysis/structure.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <unordered_map>

#include "sim/analysis/ranges.hpp"

namespace bneck {
namespace {

constexpr std::uint64_t kBase = 0x9E3779B97F4A7C15ull;  // odd: hashes of symbol runs mod 2^64

// One process's device ops in launch order, with what the search needs of each.
struct Seq {
  std::uint32_t process = 0;
  std::vector<OpId> dev;
  std::vector<std::uint32_t> sym;
  std::vector<LaneId> thread;   // launching thread (kNone: no launch recorded)
  std::vector<TimeNs> score;    // boundary evidence before the op: host time since the previous launch + GPU idle
  std::vector<std::uint64_t> h, pw;  // prefix hashes, powers of kBase
  std::uint64_t window(std::size_t i, std::size_t len) const { return h[i + len] - h[i] * pw[len]; }
};

struct Loop {
  std::size_t len = 0;
  std::uint32_t anchor = 0;          // symbol
  std::vector<std::size_t> starts;   // positions in the sequence, increasing, >= len apart
  std::vector<std::size_t> lens;     // a loop of similar, not equal, instances: each one's length
  std::size_t coverage() const {
    if (lens.empty()) return len * starts.size();
    std::size_t c = 0;
    for (std::size_t l : lens) c += l;
    return c;
  }
};

std::vector<Seq> launch_sequences(const Trace& t) {
  std::map<std::uint32_t, std::vector<std::pair<TimeNs, OpId>>> by_proc;
  for (OpId i = 0; i < t.ops.size(); ++i) {
    const Op& o = t.ops[i];
    if (!is_device_op(o.kind)) continue;
    LaneId l = o.link != kNone ? t.ops[o.link].lane : o.lane;
    std::uint32_t p = l < t.lanes.size() ? t.lanes[l].process : 0;
    by_proc[p].emplace_back(o.link != kNone ? t.ops[o.link].start : o.start, i);
  }
  std::unordered_map<std::uint64_t, std::uint32_t> symbols;
  std::vector<Seq> out;
  for (auto& [p, v] : by_proc) {
    std::sort(v.begin(), v.end(), [&](const auto& a, const auto& b) {
      if (a.first != b.first) return a.first < b.first;
      const Op &x = t.ops[a.second], &y = t.ops[b.second];
      if (x.link != y.link) return x.link < y.link;
      return std::make_pair(x.start, a.second) < std::make_pair(y.start, b.second);
    });
    Seq s;
    s.process = p;
    const std::size_t n = v.size();
    s.dev.resize(n);
    s.sym.resize(n);
    s.thread.resize(n);
    s.score.resize(n);
    TimeNs max_end = 0, max_score = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const OpId d = v[k].second;
      const Op& o = t.ops[d];
      s.dev[k] = d;
      std::uint64_t key = static_cast<std::uint64_t>(o.kind) << 40;
      if (o.kind == OpKind::Kernel)
        key |= o.name;
      else if (const CopyInfo* c = t.copy(o))
        key |= static_cast<std::uint64_t>(c->copy_kind);
      s.sym[k] = symbols.emplace(key, static_cast<std::uint32_t>(symbols.size())).first->second;
      s.thread[k] = o.link != kNone ? t.ops[o.link].lane : kNone;
      if (k > 0) {
        s.score[k] = std::max<TimeNs>(0, v[k].first - v[k - 1].first) + std::max<TimeNs>(0, o.start - max_end);
        max_score = std::max(max_score, s.score[k]);
      }
      max_end = k ? std::max(max_end, o.end()) : o.end();
    }
    if (n) s.score[0] = max_score + 1;  // the start of the run is a boundary
    s.h.assign(n + 1, 0);
    s.pw.assign(n + 1, 1);
    for (std::size_t k = 0; k < n; ++k) {
      s.h[k + 1] = s.h[k] * kBase + s.sym[k] + 1;
      s.pw[k + 1] = s.pw[k] * kBase;
    }
    out.push_back(std::move(s));
  }
  return out;
}

constexpr std::uint32_t kBoundaryAnchor = 0xFFFFFFFFu;  // anchored on boundary evidence, not a symbol
constexpr std::uint32_t kPeriodAnchor = 0xFFFFFFFEu;    // anchored on a recurrence distance

// The candidate loop of an anchor's occurrences `q` in [lo, hi): windows of its most frequent
// distance L, moved back by as much as the ops before its first two L-apart occurrences agree
// (so that a repeat of two copies, the anchor inside them, still shows two windows; boundary
// anchors are starts and stay), kept where
// they hold the most frequent content, >= L apart.
std::optional<Loop> candidate(const Seq& s, const std::vector<std::size_t>& q, std::uint32_t anchor, std::size_t lo, std::size_t hi,
                              const std::vector<std::uint32_t>& taken_prefix, std::size_t min_len, std::vector<std::size_t>& gaps,
                              std::vector<std::pair<std::uint64_t, std::size_t>>& hs) {
  auto free_window = [&](std::size_t i, std::size_t len) { return taken_prefix[i + len] == taken_prefix[i]; };
  gaps.clear();
  for (std::size_t j = 0; j + 1 < q.size(); ++j) gaps.push_back(q[j + 1] - q[j]);
  std::sort(gaps.begin(), gaps.end());
  std::size_t len = 0, best = 0;
  for (std::size_t j = 0; j < gaps.size();) {
    std::size_t k = j;
    while (k < gaps.size() && gaps[k] == gaps[j]) ++k;
    if (k - j >= best) {  // ties: the larger distance
      best = k - j;
      len = gaps[j];
    }
    j = k;
  }
  if (len < min_len || len * 2 > hi - lo) return std::nullopt;
  std::size_t back = 0;
  for (std::size_t j = 0; j + 1 < q.size() && anchor != kBoundaryAnchor; ++j)
    if (q[j + 1] - q[j] == len) {
      while (back + 1 < len && q[j] >= lo + back + 1 && s.sym[q[j] - back - 1] == s.sym[q[j + 1] - back - 1]) ++back;
      break;
    }
  hs.clear();
  for (std::size_t i : q)
    if (i >= lo + back && i - back + len <= hi && free_window(i - back, len)) hs.emplace_back(s.window(i - back, len), i - back);
  if (hs.size() < 2) return std::nullopt;
  std::sort(hs.begin(), hs.end());
  // The most frequent window content (ties: the earliest).
  std::uint64_t mode = hs[0].first;
  std::size_t mode_n = 0, mode_first = hs[0].second;
  for (std::size_t j = 0; j < hs.size();) {
    std::size_t k = j;
    while (k < hs.size() && hs[k].first == hs[j].first) ++k;
    if (k - j > mode_n || (k - j == mode_n && hs[j].second < mode_first)) {
      mode_n = k - j;
      mode = hs[j].first;
      mode_first = hs[j].second;
    }
    j = k;
  }
  if (mode_n < 2) return std::nullopt;
  Loop l;
  l.len = len;
  l.anchor = anchor;
  for (const auto& [hv, i] : hs)  // sorted by (hash, position): the mode's windows in order
    if (hv == mode && (l.starts.empty() || i >= l.starts.back() + len)) l.starts.push_back(i);
  if (l.starts.size() < 2) return std::nullopt;
  // A loop runs its instances back to back (a tandem repeat) at least half the time: equal windows
  // scattered through a sequence without structure (a random mix of three kernels) are not one.
  std::size_t adjacent = 0;
  for (std::size_t j = 0; j + 1 < l.starts.size(); ++j) adjacent += l.starts[j + 1] - l.starts[j] == len;
  if (adjacent * 2 < l.starts.size() - 1 || adjacent == 0) return std::nullopt;
  return l;
}

// The lower median of the boundary evidence at `pos`, the run's first op left out (it has none).
TimeNs median_score(const Seq& s, const std::vector<std::size_t>& pos) {
  std::vector<TimeNs> v;
  for (std::size_t p : pos)
    if (p > 0) v.push_back(s.score[p]);
  if (v.empty()) return 0;
  const auto mid = static_cast<std::ptrdiff_t>((v.size() - 1) / 2);
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  return v[static_cast<std::size_t>(mid)];
}

// The starts of `a` that are not starts of `b` (sorted).
std::vector<std::size_t> starts_not_in(const Loop& a, const Loop& b) {
  std::vector<std::size_t> out;
  for (std::size_t p : a.starts)
    if (!std::binary_search(b.starts.begin(), b.starts.end(), p)) out.push_back(p);
  return out;
}

// The candidate loops of [lo, hi) outside the taken positions, from every kind of anchor.
struct Search {
  const Seq& s;
  std::size_t lo, hi;
  const std::vector<std::uint32_t>& taken_prefix;
  std::size_t min_len, min_cover;
  std::vector<std::size_t> free_pos, offset, occ;  // free positions grouped by symbol, each in order
  std::uint32_t nsym = 0;
  std::vector<Loop> cands;
  std::vector<std::size_t> q, gaps;
  std::vector<std::pair<std::uint64_t, std::size_t>> hs;

  Search(const Seq& seq, std::size_t l, std::size_t h, const std::vector<std::uint32_t>& taken, std::size_t ml, std::size_t mc)
      : s(seq), lo(l), hi(h), taken_prefix(taken), min_len(ml), min_cover(mc) {
    for (std::size_t i = lo; i < hi; ++i)
      if (taken_prefix[i + 1] == taken_prefix[i]) {
        free_pos.push_back(i);
        nsym = std::max(nsym, s.sym[i] + 1);
      }
    offset.assign(nsym + 1, 0);
    occ.resize(free_pos.size());
    for (std::size_t i : free_pos) offset[s.sym[i] + 1]++;
    for (std::size_t k = 1; k < offset.size(); ++k) offset[k] += offset[k - 1];
    std::vector<std::size_t> fill(offset.begin(), offset.end() - 1);
    for (std::size_t i : free_pos) occ[fill[s.sym[i]]++] = i;
  }
  // The candidate anchored on the positions in `q`, kept if it covers enough.
  void consider(std::uint32_t anchor) {
    if (q.size() < 2) return;
    auto l = candidate(s, q, anchor, lo, hi, taken_prefix, min_len, gaps, hs);
    if (l && l->coverage() >= min_cover) cands.push_back(std::move(*l));
  }
  // Every symbol's occurrences.
  void symbols() {
    for (std::uint32_t a = 0; a < nsym; ++a) {
      q.assign(occ.begin() + static_cast<std::ptrdiff_t>(offset[a]), occ.begin() + static_cast<std::ptrdiff_t>(offset[a + 1]));
      consider(a);
    }
  }
  // The k strongest boundaries, k = 2, 3, 4, 6, 8, 12, ... up to 30 % of the positions: the
  // candidate's own test (a common distance, equal content) keeps the k that is a unit's starts
  // (a unit in which every kernel occurs more than once: a decode step of identical layers).
  void boundaries() {
    if (free_pos.size() < 4) return;
    std::vector<TimeNs> sc;
    sc.reserve(free_pos.size());
    for (std::size_t i : free_pos) sc.push_back(s.score[i]);
    std::sort(sc.begin(), sc.end(), std::greater<>());
    const std::size_t lim = std::max<std::size_t>(2, sc.size() * 3 / 10);
    for (std::size_t k = 2, step = 0; k <= lim && k <= sc.size(); k = (step++ % 2) ? k * 4 / 3 : k * 3 / 2) {
      const TimeNs thr = sc[k - 1];
      if (thr <= 0) break;
      q.clear();
      for (std::size_t i : free_pos)
        if (s.score[i] >= thr) q.push_back(i);
      consider(kBoundaryAnchor);
    }
  }
  // Periods: the distances at which symbols recur most often (each free op to its next 16
  // occurrences), for a unit in which no kernel occurs once and no gap marks the start (12
  // identical layers of 8 kernels drawn from two); each period's tandem runs (where op i equals op
  // i + p for p ops or more) give the candidate's windows.
  void periods() {
    const std::size_t max_p = (hi - lo) / 2;
    std::vector<std::uint32_t> count(max_p + 1, 0);
    for (std::uint32_t a = 0; a < nsym; ++a)
      for (std::size_t j = offset[a]; j < offset[a + 1]; ++j)
        for (std::size_t k = j + 1; k < offset[a + 1] && k <= j + 16; ++k) {
          std::size_t d = occ[k] - occ[j];
          if (d > max_p) break;
          if (d >= min_len) ++count[d];
        }
    std::vector<std::pair<std::uint32_t, std::size_t>> top;
    for (std::size_t d = 1; d <= max_p; ++d)
      if (count[d] * 20 >= free_pos.size()) top.emplace_back(count[d], d);
    std::sort(top.begin(), top.end(), std::greater<>());
    if (top.size() > 16) top.resize(16);
    for (const auto& [c, p] : top) {
      q.clear();
      for (std::size_t i = lo; i + p < hi;) {
        std::size_t j = i;
        while (j + p < hi && s.sym[j] == s.sym[j + p]) ++j;
        if (j - i >= p)
          for (std::size_t w = i; w + p <= j + p; w += p) q.push_back(w);
        i = j + 1;
      }
      consider(kPeriodAnchor);
    }
  }
  // Loops of loops: where a loop's instances come in runs (three equal microbatches, then the first
  // one's different backward and the optimizer), the runs' starts anchor a coarser candidate (a
  // step holding no kernel of its own to anchor it, and no boundary stronger than its insides').
  void runs() {
    std::vector<std::size_t> order(cands.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return cands[a].coverage() > cands[b].coverage(); });
    const std::size_t fine = std::min<std::size_t>(order.size(), 4);
    for (std::size_t k = 0; k < fine; ++k) {
      const Loop f = cands[order[k]];  // a copy: consider() may grow cands
      q.clear();
      for (std::size_t j = 0; j < f.starts.size(); ++j)
        if (j == 0 || f.starts[j] != f.starts[j - 1] + f.len) q.push_back(f.starts[j]);
      if (q.size() < f.starts.size()) consider(f.anchor);
    }
  }
};

// The loop to take among the candidates: the largest within 5 % of the best coverage, unless it is
// only copies of a smaller one without stronger boundaries; then a coarser one whose starts show
// 3x the boundary evidence of the chosen loop's starts inside it.
std::optional<Loop> choose(const Seq& s, const std::vector<Loop>& cands) {
  std::size_t top = 0;
  for (const Loop& l : cands) top = std::max(top, l.coverage());
  std::vector<char> out(cands.size(), 0);
  for (;;) {
    std::size_t pick = cands.size();
    for (std::size_t c = 0; c < cands.size(); ++c) {
      const Loop& l = cands[c];
      if (out[c] || l.coverage() * 20 < top * 19) continue;
      if (pick == cands.size() || l.len > cands[pick].len || (l.len == cands[pick].len && l.coverage() > cands[pick].coverage())) pick = c;
    }
    if (pick == cands.size()) return std::nullopt;
    // A window that is only copies of a smaller candidate's (two rounds of a loop of rounds) is a
    // unit of its own only where its starts show much stronger boundaries than the copies inside.
    const Loop& l = cands[pick];
    bool redundant = false;
    for (const Loop& m : cands) {
      if (m.len >= l.len || l.len % m.len || s.window(l.starts[0], l.len - m.len) != s.window(l.starts[0] + m.len, l.len - m.len)) continue;
      if (median_score(s, l.starts) < 3 * std::max<TimeNs>(1, median_score(s, starts_not_in(m, l)))) redundant = true;
    }
    if (redundant) {
      out[pick] = 1;
      continue;
    }
    // A coarser unit whose starts show much stronger boundaries than the chosen loop's starts
    // inside it (tokens of identical layers, a sync between them) is the one, if it covers at
    // least half as much (warm-up steps repeat the layers but not the steps).
    const Loop* coarse = &l;
    for (const Loop& c : cands) {
      if (c.len < 2 * l.len || c.coverage() * 2 < l.coverage() || (coarse != &l && c.len <= coarse->len)) continue;
      if (median_score(s, c.starts) >= 3 * std::max<TimeNs>(1, median_score(s, starts_not_in(l, c)))) coarse = &c;
    }
    return *coarse;
  }
}

// The loop that covers most of [lo, hi) outside `taken` (see the header), or nothing.
std::optional<Loop> best_loop(const Seq& s, std::size_t lo, std::size_t hi, const std::vector<std::uint32_t>& taken_prefix,
                              std::size_t min_len, std::size_t min_cover) {
  Search search(s, lo, hi, taken_prefix, min_len, min_cover);
  search.symbols();
  search.boundaries();
  search.periods();
  if (search.cands.empty()) return std::nullopt;
  search.runs();
  return choose(s, search.cands);
}

// Rotates a loop's windows to the offset with the strongest boundary evidence (median over its
// instances), keeping the rotated windows that still hold the loop's content; one more in front
// when it does.
Loop rotate_to_boundary(const Seq& s, const Loop& l, std::size_t lo, std::size_t hi, const std::vector<std::uint32_t>& taken_prefix) {
  std::vector<TimeNs> v(l.starts.size());
  std::size_t best_r = 0;
  TimeNs best = -1;
  for (std::size_t r = 0; r < l.len; ++r) {
    for (std::size_t j = 0; j < l.starts.size(); ++j) v[j] = s.score[l.starts[j] + r];
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    TimeNs m = v[v.size() / 2];
    if (m > best) {
      best = m;
      best_r = r;
    }
  }
  if (best_r == 0) return l;
  auto free_window = [&](std::size_t i) { return i + l.len <= hi && taken_prefix[i + l.len] == taken_prefix[i]; };
  std::vector<std::size_t> cand;
  if (l.starts[0] + best_r >= lo + l.len) cand.push_back(l.starts[0] + best_r - l.len);
  for (std::size_t st : l.starts) cand.push_back(st + best_r);
  // The rotated content: that of the first rotated window that fits.
  std::optional<std::uint64_t> ref;
  for (std::size_t j = 0; j < l.starts.size() && !ref; ++j)
    if (free_window(l.starts[j] + best_r)) ref = s.window(l.starts[j] + best_r, l.len);
  if (!ref) return l;
  Loop out = l;
  out.starts.clear();
  for (std::size_t p : cand)
    if (p >= lo && free_window(p) && s.window(p, l.len) == *ref && (out.starts.empty() || p >= out.starts.back() + l.len))
      out.starts.push_back(p);
  return out.starts.size() >= l.starts.size() ? out : l;
}

// Shifts a loop's windows left while every window's predecessor equals its last op (the leftmost
// rotation of a tandem repeat), inside [lo, hi).
void rotate_leftmost(const Seq& s, Loop& l, std::size_t lo) {
  for (;;) {
    for (std::size_t st : l.starts)
      if (st == lo || s.sym[st - 1] != s.sym[st - 1 + l.len]) return;
    for (std::size_t& st : l.starts) --st;
  }
}

std::vector<std::uint32_t> prefix_of(const std::vector<char>& taken) {
  std::vector<std::uint32_t> p(taken.size() + 1, 0);
  for (std::size_t i = 0; i < taken.size(); ++i) p[i + 1] = p[i] + (taken[i] ? 1u : 0u);
  return p;
}

// Loops found greedily in [lo, hi): each takes its windows, the next searches the rest.
std::vector<Loop> find_loops(const Seq& s, std::size_t lo, std::size_t hi, std::size_t min_len, bool boundary_rotation) {
  std::vector<Loop> loops;
  std::vector<char> taken(s.sym.size(), 0);
  const std::size_t min_cover = std::max<std::size_t>(2, (hi - lo) / 20);
  for (int round = 0; round < 8; ++round) {
    auto prefix = prefix_of(taken);
    auto l = best_loop(s, lo, hi, prefix, min_len, min_cover);
    if (!l) break;
    // A later loop is another phase of the run only at a comparable scale: a quarter of the first
    // loop's coverage and a sixteenth of its length (not a burst of weight copies at start-up).
    if (!loops.empty() && (l->coverage() * 4 < loops.front().coverage() || l->len * 16 < loops.front().len)) break;
    Loop r = boundary_rotation ? rotate_to_boundary(s, *l, lo, hi, prefix) : *l;
    if (!boundary_rotation) rotate_leftmost(s, r, lo);
    for (std::size_t st : r.starts) std::fill(taken.begin() + static_cast<std::ptrdiff_t>(st), taken.begin() + static_cast<std::ptrdiff_t>(st + r.len), 1);
    loops.push_back(std::move(r));
  }
  std::sort(loops.begin(), loops.end(), [](const Loop& a, const Loop& b) { return a.starts[0] < b.starts[0]; });
  return loops;
}

// Instances that are alike but not equal (an inference engine's steps: the batch changes the
// kernels cuBLAS picks and the attention's): the segments between the strongest boundaries (the
// top k of the host-plus-GPU gaps, k = 4, 6, 8, 12, ... up to 30 % of the ops) when at least 60 %
// of them are within 25 % of the median length; the k whose segments of 0.5-2x the median cover
// most. Nothing unless they cover 60 % of the sequence, 4 of them or more.
std::optional<Loop> approximate_loop(const Seq& s) {
  const std::size_t n = s.sym.size();
  if (n < 16) return std::nullopt;
  std::vector<TimeNs> sc(s.score.begin(), s.score.end());
  std::sort(sc.begin(), sc.end(), std::greater<>());
  std::optional<Loop> best;
  std::vector<std::size_t> q, len;
  for (std::size_t k = 4, step = 0; k <= n * 3 / 10; k = (step++ % 2) ? k * 4 / 3 : k * 3 / 2) {
    const TimeNs thr = sc[k - 1];
    if (thr <= 0) break;
    q.clear();
    for (std::size_t i = 0; i < n; ++i)
      if (s.score[i] >= thr) q.push_back(i);
    len.clear();
    for (std::size_t j = 0; j + 1 < q.size(); ++j) len.push_back(q[j + 1] - q[j]);
    if (len.size() < 4) continue;
    std::vector<std::size_t> sorted = len;
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2), sorted.end());
    const std::size_t med = sorted[sorted.size() / 2];
    if (med < 2) continue;
    std::size_t regular = 0;
    for (std::size_t l : len) regular += 4 * (l > med ? l - med : med - l) <= med;
    if (regular * 10 < len.size() * 6) continue;
    Loop l;
    l.len = med;
    l.anchor = kBoundaryAnchor;
    for (std::size_t j = 0; j < len.size(); ++j)
      if (2 * len[j] >= med && len[j] <= 2 * med) {
        l.starts.push_back(q[j]);
        l.lens.push_back(len[j]);
      }
    if (l.starts.size() >= 4 && (!best || l.coverage() > best->coverage())) best = std::move(l);
  }
  if (!best || best->coverage() * 10 < n * 6) return std::nullopt;
  // The strongest gaps may lie inside the instances (a library building a plan on a new shape):
  // re-anchor on the kernel that occurs once an instance with the strongest boundary evidence
  // before it (median over its occurrences), when one occurs about as often as there are segments.
  const std::size_t k = best->starts.size(), med = best->len;
  std::vector<std::vector<std::size_t>> occ;
  for (std::size_t i = 0; i < n; ++i) {
    if (s.sym[i] >= occ.size()) occ.resize(s.sym[i] + 1);
    occ[s.sym[i]].push_back(i);
  }
  std::optional<Loop> anchored;
  TimeNs anchored_score = -1;
  for (std::uint32_t a = 0; a < occ.size(); ++a) {
    const auto& o = occ[a];
    if (o.size() * 10 < k * 9 || o.size() * 10 > k * 11 + 10) continue;
    Loop l;
    l.len = med;
    l.anchor = a;
    for (std::size_t j = 0; j + 1 < o.size(); ++j) {
      std::size_t g = o[j + 1] - o[j];
      if (2 * g >= med && g <= 2 * med) {
        l.starts.push_back(o[j]);
        l.lens.push_back(g);
      }
    }
    if (l.starts.size() * 10 < (o.size() - 1) * 8) continue;
    std::vector<TimeNs> v;
    for (std::size_t p : l.starts) v.push_back(s.score[p]);
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    if (v[v.size() / 2] > anchored_score) {
      anchored_score = v[v.size() / 2];
      anchored = std::move(l);
    }
  }
  if (anchored && anchored->coverage() * 10 >= n * 6) return anchored;
  return best;
}

StructureInstance make_instance(const Trace& t, const Seq& s, std::size_t b, std::size_t e, std::uint32_t loop) {
  StructureInstance in;
  in.rank = s.process < t.processes.size() && t.processes[s.process].rank != kNone ? t.processes[s.process].rank : s.process;
  in.loop = loop;
  in.ops.assign(s.dev.begin() + static_cast<std::ptrdiff_t>(b), s.dev.begin() + static_cast<std::ptrdiff_t>(e));
  const Span gpu = measured_span(t, in.ops);
  in.start_ns = gpu.begin;
  in.end_ns = gpu.end;
  bool first = true;
  for (OpId d : in.ops) {
    const Op& o = t.ops[d];
    TimeNs hs = o.link != kNone ? t.ops[o.link].start : o.start;
    in.host_start_ns = first ? hs : std::min(in.host_start_ns, hs);
    in.host_end_ns = first ? hs : std::max(in.host_end_ns, hs);
    first = false;
  }
  in.lane = s.thread[b];
  return in;
}

std::string symbol_name(const Trace& t, const Seq& s, std::uint32_t sym) {
  if (sym == kBoundaryAnchor) return "the host and GPU gaps at its start";
  if (sym == kPeriodAnchor) return "its period (no kernel or gap marks its start)";
  for (std::size_t i = 0; i < s.sym.size(); ++i)
    if (s.sym[i] == sym) {
      const Op& o = t.ops[s.dev[i]];
      std::string n = o.kind == OpKind::Kernel ? canonical_kernel_name(t.name(o)) : t.name(o);
      return n.size() > 60 ? n.substr(0, 57) + "..." : n;
    }
  return "?";
}

void summarize(StructureLevel& lv) {
  std::sort(lv.instances.begin(), lv.instances.end(), [](const StructureInstance& a, const StructureInstance& b) {
    return std::make_tuple(a.rank, a.start_ns, a.loop) < std::make_tuple(b.rank, b.start_ns, b.loop);
  });
  std::vector<double> spans, periods;
  for (std::size_t i = 0; i < lv.instances.size(); ++i) {
    const auto& in = lv.instances[i];
    spans.push_back(static_cast<double>(in.end_ns - in.start_ns));
    for (std::size_t j = i + 1; j < lv.instances.size(); ++j)
      if (lv.instances[j].rank == in.rank && lv.instances[j].loop == in.loop) {
        periods.push_back(static_cast<double>(lv.instances[j].start_ns - in.start_ns));
        break;
      }
  }
  if (spans.empty()) return;
  lv.median_ns = static_cast<TimeNs>(median(spans));
  lv.period_ns = static_cast<TimeNs>(median(periods));
  auto [mn, mx] = std::minmax_element(spans.begin(), spans.end());
  lv.spread = lv.median_ns > 0 ? (*mx - *mn) / static_cast<double>(lv.median_ns) : 0;
}

// Annotations help where present: a PyTorch profile's ProfilerStep#N ranges are its steps. When
// two thirds of the iterations found lie inside them, two or more a step (a profile of one or two steps, where the loop
// found is the layers), the steps become the iterations and that loop their layers.
void promote_profiler_steps(const Trace& t, StructureLevel& iter, StructureLevel& layer) {
  if (iter.instances.empty()) return;
  RangeIndex idx(t);
  std::vector<StructureInstance> steps;
  for (std::size_t r = 0; r < t.ranges.size(); ++r) {
    if (t.ranges[r].structure || t.strings.str(t.ranges[r].name).rfind("ProfilerStep#", 0) != 0) continue;
    StructureInstance in;
    in.ops = idx.device_ops(r);
    if (in.ops.empty()) continue;
    in.rank = t.rank_of_lane(t.ranges[r].lane);
    in.lane = t.ranges[r].lane;
    in.host_start_ns = t.ranges[r].start;
    in.host_end_ns = t.ranges[r].end;
    const Span gpu = measured_span(t, in.ops);
    in.start_ns = gpu.begin;
    in.end_ns = gpu.end;
    steps.push_back(std::move(in));
  }
  if (steps.empty() || steps.size() * 2 > iter.instances.size()) return;
  std::vector<StructureInstance> inner;
  for (StructureInstance& i : iter.instances) {
    bool inside = false;
    for (const StructureInstance& st : steps) inside = inside || (st.rank == i.rank && st.start_ns <= i.start_ns && i.end_ns <= st.end_ns);
    if (inside) inner.push_back(std::move(i));
  }
  // Most of them inside (a warm-up outside the profiled steps may repeat the loop too).
  if (inner.size() * 3 < iter.instances.size() * 2 || inner.size() < 2 * steps.size()) return;
  layer.instances = std::move(inner);
  layer.how = iter.how + " (inside the profiler's steps)";
  iter.instances = std::move(steps);
  iter.how = "the PyTorch profiler's ProfilerStep#N ranges, holding the loop found";
}

}  // namespace

const StructureLevel* Structure::level(const std::string& name) const {
  for (const auto& l : levels)
    if (l.name == name) return &l;
  return nullptr;
}

Structure find_structure(const Trace& t) {
  Structure st;
  StructureLevel iter{"iteration", "", {}, 0, 0, 0}, layer{"layer", "", {}, 0, 0, 0};
  StructureLevel fwd{"forward", "the ops before each backward pass in each iteration", {}, 0, 0, 0};
  StructureLevel bwd{"backward", "the runs of each iteration's ops launched by another thread (an autograd engine)", {}, 0, 0, 0};
  StructureLevel mb{"microbatch", "a forward and the backward after it, where an iteration holds two or more (gradient accumulation)",
                    {}, 0, 0, 0};
  StructureLevel run{"run", "each process's launches, first to last", {}, 0, 0, 0};
  std::uint32_t loop_id = 0, inner_id = 0;
  for (const Seq& s : launch_sequences(t)) {
    const std::size_t n = s.sym.size();
    if (n) run.instances.push_back(make_instance(t, s, 0, n, 0));
    std::vector<Loop> loops = find_loops(s, 0, n, 2, true);  // one op repeated is no iteration
    // The exact loop that covers most; alike-but-unequal segments replace the exact loops when
    // they cover 1.5x as much at no finer a scale (an engine's steps, not their repeated layers).
    std::size_t exact = 0, exact_len = 0;
    for (const Loop& l : loops)
      if (l.coverage() > exact) {
        exact = l.coverage();
        exact_len = l.len;
      }
    if (exact * 10 < n * 9)
      if (auto a = approximate_loop(s); a && a->coverage() * 2 > exact * 3 && 2 * a->len >= exact_len) {
        iter.how = "segments of about " + std::to_string(a->len) + " device ops (alike, not equal) x " + std::to_string(a->starts.size()) +
                   ", starting at " + (a->anchor == kBoundaryAnchor ? std::string("the strongest host and GPU gaps") : symbol_name(t, s, a->anchor));
        const std::uint32_t id = loop_id++;
        for (std::size_t j = 0; j < a->starts.size(); ++j)
          iter.instances.push_back(make_instance(t, s, a->starts[j], a->starts[j] + a->lens[j], id));
        continue;  // their insides differ: no layers copied by offset
      }
    for (const Loop& l : loops) {
      if (iter.how.empty())
        iter.how = "a loop of " + std::to_string(l.len) + " device ops x " + std::to_string(l.starts.size()) + ", anchored on " +
                   symbol_name(t, s, l.anchor);
      const std::uint32_t id = loop_id++;
      for (std::size_t b : l.starts) iter.instances.push_back(make_instance(t, s, b, b + l.len, id));
      // Layers: inside one instance (all hold the same ops), copied into the others by offset.
      const std::size_t ref = l.starts[0];
      for (const Loop& in : find_loops(s, ref, ref + l.len, 2, false)) {
        if (layer.how.empty())
          layer.how = "a loop of " + std::to_string(in.len) + " device ops x " + std::to_string(in.starts.size()) +
                      " in each iteration, anchored on " + symbol_name(t, s, in.anchor);
        const std::uint32_t lid = inner_id++;
        for (std::size_t b : l.starts)
          for (std::size_t ib : in.starts) layer.instances.push_back(make_instance(t, s, b + (ib - ref), b + (ib - ref) + in.len, lid));
      }
      // Backward passes: the runs of ops launched by a thread other than the first op's (the caller
      // blocks in backward() while the autograd thread launches), each at least 8 ops and 2 % of
      // the iteration; the forward pass before each; with two or more, microbatches (gradient
      // accumulation: forward and backward, M times, then the optimizer).
      std::vector<std::pair<std::size_t, std::size_t>> runs;
      for (std::size_t i = ref; i < ref + l.len;) {
        std::size_t j = i;
        while (j < ref + l.len && s.thread[j] != kNone && s.thread[j] != s.thread[ref]) ++j;
        if (j - i >= 8 && (j - i) * 50 >= l.len) runs.emplace_back(i - ref, j - ref);
        i = j + 1;
      }
      for (std::size_t b : l.starts) {
        std::size_t prev = 0;
        for (const auto& [rb, re] : runs) {
          bwd.instances.push_back(make_instance(t, s, b + rb, b + re, id));
          if (rb > prev) fwd.instances.push_back(make_instance(t, s, b + prev, b + rb, id));
          if (runs.size() >= 2) mb.instances.push_back(make_instance(t, s, b + prev, b + re, id));
          prev = re;
        }
      }
    }
  }
  if (iter.instances.empty()) run.instances.clear();  // no loop: nothing to say
  promote_profiler_steps(t, iter, layer);
  for (StructureLevel* lv : {&run, &iter, &layer, &mb, &fwd, &bwd})
    if (!lv->instances.empty()) {
      summarize(*lv);
      st.levels.push_back(std::move(*lv));
    }
  // Conventions the trace follows, for the reader of info and replay.
  std::map<std::string, std::size_t> families;
  for (const Range& r : t.ranges) {
    if (r.structure) continue;
    std::string n = t.strings.str(r.name);
    if (n.rfind("ProfilerStep#", 0) == 0) {
      families["ProfilerStep#N ranges (PyTorch profiler steps)"]++;
    } else if (n.find(", sizes = ") != std::string::npos) {
      families["op ranges with shapes (emit_nvtx or record_shapes)"]++;
    } else if (n.find(", op_id = ") != std::string::npos || n.find(", seq = ") != std::string::npos || n.rfind("aten::", 0) == 0 ||
               n.rfind("autograd::", 0) == 0 || n.find('#') != std::string::npos) {
      families["PyTorch op ranges (emit_nvtx, record_function)"]++;
    } else if (!n.empty() && n.size() <= 40 && std::isdigit(static_cast<unsigned char>(n.back()))) {
      std::size_t k = n.find_last_not_of("0123456789");
      families["numbered ranges " + n.substr(0, k + 1) + "N"]++;
    }
  }
  for (const auto& [f, c] : families) st.conventions.push_back(f + ": " + std::to_string(c));
  if (const StructureLevel* b = st.level("backward"))
    st.conventions.push_back("backward launched by another thread than the caller's (" + std::to_string(b->instances.size()) +
                             " iterations): ranges take it by the process rule");
  std::size_t graph_nodes = 0;
  for (const Op& o : t.ops) graph_nodes += (o.flags & Op::kFlagGraphNode) ? 1 : 0;
  if (graph_nodes) st.conventions.push_back("CUDA graph nodes: " + std::to_string(graph_nodes));
  return st;
}

void add_structure_ranges(Trace& t, const Structure& s) {
  for (const Range& r : t.ranges)
    if (r.structure) return;
  // Each instance's parent: the instance of the level above that holds it (@run > @iteration >
  // @layer, @forward, @backward), found by start among that level's ranges of its process.
  std::map<std::string, std::vector<std::uint32_t>> by_level;  // range indices, by host start
  auto process_of = [&](const Range& r) { return t.lanes[r.lane].process; };
  for (const StructureLevel& lv : s.levels) {
    StrId name = t.strings.intern("@" + lv.name);
    const char* up = lv.name == "run" ? nullptr : lv.name == "iteration" ? "run" : "iteration";
    const std::vector<std::uint32_t>* parents = up && by_level.count(up) ? &by_level[up] : nullptr;
    auto& mine = by_level[lv.name];
    for (const StructureInstance& in : lv.instances) {
      if (in.ops.empty()) continue;
      Range r;
      r.start = in.host_start_ns;
      r.end = in.host_end_ns;
      r.name = name;
      r.lane = in.lane;
      if (r.lane == kNone) {  // no launch calls: device time on the first op's stream
        r.lane = t.ops[in.ops.front()].lane;
        r.start = t.ops[in.ops.front()].start;
        r.end = r.start;
        for (OpId o : in.ops) r.end = std::max(r.end, t.ops[o].start);
      }
      r.structure = true;
      if (parents) {
        auto it = std::upper_bound(parents->begin(), parents->end(), r.start,
                                   [&](TimeNs v, std::uint32_t p) { return v < t.ranges[p].start; });
        while (it != parents->begin()) {
          --it;
          const Range& p = t.ranges[*it];
          if (process_of(p) == process_of(r) && p.start <= r.start && r.end <= p.end) {
            r.parent = *it;
            r.depth = static_cast<std::uint16_t>(p.depth + 1);
            break;
          }
          if (p.end < r.start && std::distance(parents->begin(), it) + 64 < static_cast<std::ptrdiff_t>(parents->size())) break;
        }
      }
      mine.push_back(static_cast<std::uint32_t>(t.ranges.size()));
      t.ranges.push_back(r);
    }
    std::sort(mine.begin(), mine.end(), [&](std::uint32_t a, std::uint32_t b) { return t.ranges[a].start < t.ranges[b].start; });
  }
}

std::pair<std::string, std::string> default_loop_ranges(const Trace& t) {
  std::size_t iterations = 0, layers = 0;
  for (const Range& r : t.ranges)
    if (r.structure) {
      const std::string& n = t.strings.str(r.name);
      iterations += n == "@iteration";
      layers += n == "@layer";
    }
  if (iterations >= 4) return {"@run", "@iteration"};
  if (layers && iterations) return {"@iteration", "@layer"};
  return {"", ""};
}

bool add_structure_ranges_if_named(Trace& t, const std::string& text) {
  if (text.find('@') == std::string::npos) return false;
  add_structure_ranges(t, find_structure(t));
  return true;
}

}  // namespace bneck
