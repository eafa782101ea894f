// Structure recognition's loop search: see structure_loops.hpp.
#include "sim/analysis/structure_loops.hpp"

#include <algorithm>
#include <iterator>
#include <cctype>
#include <string>
#include <map>
#include <numeric>
#include <optional>
#include <unordered_map>

#include "sim/analysis/structure.hpp"
#include "sim/base/strings.hpp"

namespace bneck::structure_loops {
namespace {

constexpr std::uint64_t kBase = 0x9E3779B97F4A7C15ull;  // odd: hashes of symbol runs mod 2^64

// The element at the middle (the upper one of an even count) of a non-empty `v`, reordering it.
template <class T>
T middle(std::vector<T>& v) {
  const auto mid = static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  return v[static_cast<std::size_t>(mid)];
}

// An optimizer step's kernel by its name: PyTorch's foreach and fused optimizers
// (multi_tensor_apply_kernel, fused_adam), apex's and others' (adam, sgd, adagrad, rmsprop).
bool optimizer_kernel(const std::string& name) {
  const std::string n = ascii_lower(name);
  for (const char* k : {"multi_tensor_apply", "adam", "sgd", "adagrad", "rmsprop", "optimizer"})
    if (n.find(k) != std::string::npos) return true;
  return false;
}

}  // namespace

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
    s.optimizer.assign(n, 0);
    std::unordered_map<StrId, char> optimizer_by_name;
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
      if (o.kind == OpKind::Kernel) {  // by name id, each name read once
        auto it = optimizer_by_name.find(o.name);
        if (it == optimizer_by_name.end()) it = optimizer_by_name.emplace(o.name, optimizer_kernel(t.name(o))).first;
        s.optimizer[k] = it->second;
      }
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

namespace {

// The candidate loop of an anchor's occurrences `q` in [lo, hi): windows of its most frequent
// distance L, moved back by as much as the ops before its first two L-apart occurrences agree
// (so that a repeat of two copies, the anchor inside them, still shows two windows; boundary
// anchors are starts and stay), kept where
// they hold the most frequent content, >= L apart.
std::optional<Loop> candidate(const Seq& s, const std::vector<std::size_t>& q, std::uint32_t anchor, std::size_t lo, std::size_t hi,
                              const std::vector<std::uint32_t>& taken_prefix, std::size_t min_len, std::vector<std::size_t>& gaps,
                              std::vector<std::pair<std::uint64_t, std::size_t>>& hs) {
  auto free_window = [&](std::size_t i, std::size_t len) { return taken_prefix[i + len] == taken_prefix[i]; };
  // The most frequent distance between consecutive occurrences (ties: the larger distance):
  // counted in `gaps` by distance where the largest is within a few times their number (the
  // strongest boundaries of a long run: thousands of positions), else sorted.
  std::size_t len = 0, best = 0, widest = 0;
  for (std::size_t j = 0; j + 1 < q.size(); ++j) widest = std::max(widest, q[j + 1] - q[j]);
  if (widest <= 4 * q.size() + 64) {
    gaps.assign(widest + 1, 0);
    for (std::size_t j = 0; j + 1 < q.size(); ++j) ++gaps[q[j + 1] - q[j]];
    for (std::size_t d = 1; d <= widest; ++d)
      if (gaps[d] > 0 && gaps[d] >= best) {
        best = gaps[d];
        len = d;
      }
  } else {
    gaps.clear();
    for (std::size_t j = 0; j + 1 < q.size(); ++j) gaps.push_back(q[j + 1] - q[j]);
    std::sort(gaps.begin(), gaps.end());
    for (std::size_t j = 0; j < gaps.size();) {
      std::size_t k = j;
      while (k < gaps.size() && gaps[k] == gaps[j]) ++k;
      if (k - j >= best) {
        best = k - j;
        len = gaps[j];
      }
      j = k;
    }
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
  std::set_difference(a.starts.begin(), a.starts.end(), b.starts.begin(), b.starts.end(), std::back_inserter(out));
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

// The offsets of a loop's window where an instance may begin, by a training step's anatomy (its
// forward, then the backward another thread launches, then the optimizer): where the window holds
// an optimizer's kernels launched by one thread and ops of another thread (a backward), an
// instance begins after the optimizer's last kernel that follows a backward and no later than the
// next backward; with a backward and no optimizer, right after a backward. Anything else: every
// offset.
std::vector<char> anatomy_offsets(const Seq& s, const Loop& l) {
  const std::size_t n = l.len, b = l.starts[0];
  std::vector<char> ok(n, 1);
  LaneId main = kNone;
  for (std::size_t k = 0; k < n && main == kNone; ++k)
    if (s.optimizer[b + k]) main = s.thread[b + k];
  if (main == kNone) main = s.first_thread(b, b + n);
  auto bw = [&](std::size_t k) { return s.thread[b + k % n] != main && s.thread[b + k % n] != kNone; };
  std::size_t bw_ops = 0;
  for (std::size_t k = 0; k < n; ++k) bw_ops += bw(k);
  if (main == kNone || bw_ops == 0 || bw_ops == n) return ok;
  std::fill(ok.begin(), ok.end(), 0);
  bool any_opt = false;
  for (std::size_t k = 0; k < n; ++k) {
    if (!bw(k) || bw(k + 1)) continue;  // k: the last op of a backward run
    std::size_t next = k + 1, last_opt = 0;
    bool opt = false;
    for (std::size_t m = k + 1; m < k + 1 + n && !bw(m); ++m, next = m)
      if (s.optimizer[b + m % n]) {
        opt = true;
        last_opt = m;
      }
    if (opt) {
      if (!any_opt) std::fill(ok.begin(), ok.end(), 0);  // the optimizer's segment rules
      any_opt = true;
      for (std::size_t m = last_opt + 1; m < std::max(next, last_opt + 2); ++m) ok[m % n] = 1;
    } else if (!any_opt) {
      ok[(k + 1) % n] = 1;
    }
  }
  return ok;
}

// Rotates a loop's windows to the offset with the strongest boundary evidence (median over its
// instances) that a training step's anatomy allows (anatomy_offsets), keeping the rotated windows
// that still hold the loop's content; one more in front when it does. With `contrast` > 0, only
// where that offset's evidence is `contrast` times the median offset's (a loop inside an
// iteration: the host sync between decode tokens, not the launch gaps between layers).
Loop rotate_to_boundary(const Seq& s, const Loop& l, std::size_t lo, std::size_t hi, const std::vector<std::uint32_t>& taken_prefix,
                        double contrast = 0) {
  std::vector<TimeNs> v(l.starts.size()), per_offset;
  std::size_t best_r = 0;
  TimeNs best = -1;
  const std::vector<char> allowed = anatomy_offsets(s, l);
  for (std::size_t r = 0; r < l.len; ++r) {
    if (!allowed[r]) continue;
    for (std::size_t j = 0; j < l.starts.size(); ++j) v[j] = s.score[l.starts[j] + r];
    const TimeNs m = middle(v);
    per_offset.push_back(m);
    if (m > best) {
      best = m;
      best_r = r;
    }
  }
  if (best_r == 0) return l;
  if (contrast > 0 && static_cast<double>(best) < contrast * static_cast<double>(std::max<TimeNs>(1, middle(per_offset)))) return l;
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

}  // namespace

// An inner loop's windows move to a boundary only where it stands out this much (decode tokens
// split by a host sync: 6.8x the median gap in a host-bound GPT-2 decode).
constexpr double kInnerContrast = 4;

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
    Loop r = rotate_to_boundary(s, *l, lo, hi, prefix, boundary_rotation ? 0 : kInnerContrast);
    if (!boundary_rotation && r.starts == l->starts) rotate_leftmost(s, r, lo);
    for (std::size_t st : r.starts)
      std::fill(taken.begin() + static_cast<std::ptrdiff_t>(st), taken.begin() + static_cast<std::ptrdiff_t>(st + r.len), 1);
    loops.push_back(std::move(r));
  }
  std::sort(loops.begin(), loops.end(), [](const Loop& a, const Loop& b) { return a.starts[0] < b.starts[0]; });
  return loops;
}

std::optional<Loop> split_alike(const Seq& s, const Loop& l) {
  if (l.starts.size() < 2 || !l.lens.empty() || l.len < 8) return std::nullopt;
  const std::vector<char> allowed = anatomy_offsets(s, l);
  auto median_at = [&](std::size_t r) {
    std::vector<TimeNs> v;
    for (std::size_t st : l.starts)
      if (st > 0) v.push_back(s.score[st + r]);
    return v.empty() ? TimeNs{0} : middle(v);
  };
  std::vector<TimeNs> at(l.len);
  for (std::size_t r = 0; r < l.len; ++r) at[r] = median_at(r);
  const TimeNs start = at[0];
  if (start <= 0) return std::nullopt;
  std::vector<TimeNs> sorted_at = at;
  const TimeNs typical = std::max<TimeNs>(1, middle(sorted_at));
  std::vector<std::size_t> cuts{0};
  for (std::size_t r = 1; r < l.len; ++r)
    if (allowed[r] && 8 * at[r] >= start && at[r] >= 16 * typical) cuts.push_back(r);
  if (cuts.size() < 2) return std::nullopt;
  cuts.push_back(l.len);
  std::vector<std::size_t> len;
  for (std::size_t j = 0; j + 1 < cuts.size(); ++j) len.push_back(cuts[j + 1] - cuts[j]);
  const auto [mn, mx] = std::minmax_element(len.begin(), len.end());
  if (*mn < 4 || *mx > 2 * *mn) return std::nullopt;
  const std::size_t b = l.starts[0];
  std::size_t equal = 0;
  for (std::size_t j = 0; j + 2 < cuts.size(); ++j)
    equal += len[j] == len[j + 1] && s.window(b + cuts[j], len[j]) == s.window(b + cuts[j + 1], len[j + 1]);
  if (2 * equal > len.size() - 1) return std::nullopt;
  Loop out;
  out.anchor = kBoundaryAnchor;
  std::vector<std::size_t> sorted = len;
  out.len = middle(sorted);
  for (std::size_t st : l.starts)
    for (std::size_t j = 0; j + 1 < cuts.size(); ++j) {
      out.starts.push_back(st + cuts[j]);
      out.lens.push_back(len[j]);
    }
  return out;
}

std::optional<Loop> outer_of_runs(const Seq& s, const Loop& l, std::size_t lo, std::size_t hi) {
  if (l.starts.size() < 3 || !l.lens.empty()) return std::nullopt;
  // Runs of back-to-back windows, and the glue between consecutive runs.
  std::vector<std::pair<std::size_t, std::size_t>> runs;  // [first window's start, last window's end)
  for (std::size_t st : l.starts)
    if (!runs.empty() && runs.back().second == st)
      runs.back().second = st + l.len;
    else
      runs.emplace_back(st, st + l.len);
  if (runs.size() < 3) return std::nullopt;
  std::vector<std::size_t> count, glue;
  for (const auto& [b, e] : runs) count.push_back((e - b) / l.len);
  for (std::size_t j = 0; j + 1 < runs.size(); ++j) glue.push_back(runs[j + 1].first - runs[j].second);
  if (*std::min_element(count.begin(), count.end()) == *std::max_element(count.begin(), count.end())) return std::nullopt;
  std::vector<std::size_t> g = glue;
  const std::size_t g_med = middle(g);
  if (g_med == 0) return std::nullopt;
  for (std::size_t x : glue)
    if (x == 0 || x > 2 * g_med || 2 * x < g_med) return std::nullopt;
  // Each unit starts at the strongest boundary of the glue before its run (the host's work between
  // two calls: their setup, the last one's synchronization), the first one in as much glue before
  // its run; the last ends as far after its run as the others' cuts lie after theirs.
  auto cut_in = [&](std::size_t a, std::size_t b) {  // the op in (a, b] with the most evidence before it
    std::size_t best = b;
    for (std::size_t i = a + 1; i <= b && i < s.score.size(); ++i)
      if (s.score[i] > s.score[best]) best = i;
    return best;
  };
  std::vector<std::size_t> cuts;
  cuts.push_back(cut_in(runs[0].first > lo + g_med ? runs[0].first - g_med : lo, runs[0].first));
  std::vector<std::size_t> after;
  for (std::size_t j = 0; j + 1 < runs.size(); ++j) {
    const std::size_t c = cut_in(runs[j].second, runs[j + 1].first);
    cuts.push_back(c);
    after.push_back(c - runs[j].second);
  }
  cuts.push_back(std::min(hi, runs.back().second + middle(after)));
  Loop out;
  out.anchor = kBoundaryAnchor;
  for (std::size_t j = 0; j + 1 < cuts.size(); ++j) {
    out.starts.push_back(cuts[j]);
    out.lens.push_back(cuts[j + 1] - cuts[j]);
  }
  std::vector<std::size_t> ls = out.lens;
  out.len = middle(ls);
  return out;
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
    const std::size_t med = middle(sorted);
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
    if (const TimeNs m = middle(v); m > anchored_score) {
      anchored_score = m;
      anchored = std::move(l);
    }
  }
  if (anchored && anchored->coverage() * 10 >= n * 6) return anchored;
  return best;
}

}  // namespace bneck::structure_loops
