#include "traces/kineto/kineto_importer.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/base/error.hpp"
#include "traces/gzbuf.hpp"
#include "traces/json/json_walk.hpp"
#include "traces/kineto/kineto_fields.hpp"
#include "traces/cuda_api.hpp"
#include "traces/progress.hpp"

namespace bneck {

namespace {

using namespace kineto;

class Reader : public JsonSax {
 public:
  Reader(const std::string& path, const ImportOptions& opt) : path_(path), opt_(opt), progress_("importing " + path, opt.progress) {
    t_.source = path;
    t_.format = "kineto-json";
  }

  Trace run() {
    // The document in memory (decompressed where gzipped, on a thread of its own beside the
    // reading of a large one), parsed by simdjson on demand: its values walked in order through
    // the handlers below (traces/json/json_walk.hpp).
    GrowingFile file(path_, 64);  // simdjson's SIMDJSON_PADDING
    const std::string_view head = file.upto(3);
    const std::size_t bom = head.size() >= 3 && head.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;  // a UTF-8 byte order mark
    // A large trace is read in pieces (in_pieces); where that does not hold, or the text is not
    // well formed, the whole document is walked at once, which gives the errors.
    bool whole = true;
    try {
      whole = !opt_.json_pieces ||
              !in_pieces([&](std::size_t need) { return file.upto(bom + need).substr(bom); }, [&] { return file.complete(); });
    } catch (const std::exception&) {}
    const WholeFile& all = file.whole();  // the file's own errors (a corrupt gzip stream) before any result
    const std::string_view text = std::string_view(all.data.get(), all.capacity).substr(bom);
    if (whole) return Reader(path_, opt_).walk_whole(text, all.size - bom);
    return done();
  }

  Trace walk_whole(std::string_view text, std::size_t n) {
    const JsonWalk w = walk_json(text.data(), n, text.size(), *this);
    if (!w.ok && !w.handler_stop) parse_error(w.error_at, w.error);
    if (!w.ok) throw InputError(path_, error_.empty() ? "malformed JSON" : error_);
    return done();
  }

  Trace done() {
    if (!saw_events_) throw InputError(path_, "no \"traceEvents\" array: not a PyTorch profiler (Kineto) trace");
    progress_.phase("joining device ops to their launches", t_.ops.size());
    finish();
    t_.finalize();
    return std::move(t_);
  }

  // The events array of a document of 8 MB or more read in pieces of about 256 kB, each parsed as an
  // array of its own ('[', whole elements, ']') by one parser whose memory is reused: the walk
  // then touches the memory of a piece, not of the whole document (simdjson's index and strings
  // are 1-2x the text). A piece ends at a guess, the first '}' ',' '{' (whitespace between) past
  // its size. The text from a place where an element starts is the same tokens alone as in the
  // document, so the elements a piece walks whole are the document's: a guess inside a string
  // fails before any (a string left open: the next guess is tried), one inside a nested array
  // fails at the element that holds it, where the next piece starts, one past the events (among
  // the objects of an array after them) ends its array early, where the events end. The last
  // piece runs to the document's last ']' and stops at its array's end. Then the document without
  // its events ("traceEvents": [0]) is walked for the rest, the 0 where the events were (which
  // proves the array found is the root's "traceEvents"). False: not read this way; malformed text
  // is (nothing of it kept: the whole document is walked again).
  //
  // A document read whole (a plain file, mapped; a gzip stream once inflated) is read on two threads, in rounds: this
  // thread walks [p, a guess G) while a second walks from the element after G to a second guess
  // about `json_round` bytes on (or to the end of the events), keeping its events' fields (the
  // SAX part: Ev records) without making ops of them. The round counts only when this thread's
  // last piece ends whole exactly at G, which proves that G ends an element of the events (the
  // same proof as a piece's); then the second thread's events are made into ops here, in their
  // order, before this thread walks its part of the next round (the second thread meanwhile
  // reading the next round's). Where G does not end an element, or the second thread stops early
  // (its guess bad, malformed text, an event's error), this thread goes on from where the elements
  // walked whole end, so the trace, the notes and the errors are those of one thread.
  // `upto(need)`: the text ready so far, at least `need` bytes of it unless the document is shorter.
  static constexpr std::size_t kNoPos = static_cast<std::size_t>(-1), kAll = static_cast<std::size_t>(-1) / 2;
  static constexpr std::size_t kPiece = std::size_t{256} << 10, kPad = 64, kLook = std::size_t{1} << 20;
  static std::size_t ws(std::string_view text, std::size_t i) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) ++i;
    return i;
  }
  // The next guess at or after `from` in `text`: {end of the piece (after its '}'), the next
  // element's '{'}; {0, 0}: none there.
  static std::pair<std::size_t, std::size_t> guess(std::string_view text, std::size_t from) {
    for (std::size_t i = text.find('}', from); i != std::string_view::npos; i = text.find('}', i + 1)) {
      std::size_t j = ws(text, i + 1);
      if (j >= text.size() || text[j] != ',') continue;
      j = ws(text, j + 1);
      if (j < text.size() && text[j] == '{') return {i + 1, j};
    }
    return {0, 0};
  }

  // How a run of pieces ended: at its bound (`p` the element after it), at the events' end
  // (`close_at` their closing bracket), stopped early at `p` (a bounded run whose bound did not
  // end an element, or a second thread's run that failed: the elements before `p` walked), or at
  // malformed text.
  struct Run {
    enum Kind { Bound, Ended, Stopped, Malformed } kind = Malformed;
    std::size_t p = 0, close_at = 0;
  };
  struct Pieces {
    JsonArrayWalker walker;
    std::vector<char> buf;
  };

  // The handlers' state where an element of the events array starts.
  void at_events() {
    depth_ = 2;
    top_ = Top::Events;
    top_key_ = TopKey::Events;
    in_event_ = in_args_ = in_device_ = list_field_ = args_key_ = skip_rest_ = python_counted_ = false;
    field_ = Field::None;
  }

  // The elements from `p` (an element's start) in pieces, to the events' end or, given `bound`
  // {end, next} (a guess past p), to that bound.
  Run run_pieces(const std::function<std::string_view(std::size_t)>& upto, Pieces& ps, std::size_t p,
                 std::pair<std::size_t, std::size_t> bound = {kNoPos, kNoPos}, const std::atomic<bool>* stop = nullptr) {
    std::string_view text;
    // '[' + text[from, to) (+ ']'): Whole (it parsed to its own bracket), Ended (its array ended
    // before: the events array's end, at `close`), or Failed in an element that starts at `restart`
    // in `text` (kNoPos: before any) or, with `restart` kNoPos too, after a whole element (malformed).
    enum class Piece { Whole, Ended, Failed, Malformed };
    auto piece = [&](std::size_t from, std::size_t to, bool closed, std::size_t& close, std::size_t& restart) {
      const std::size_t len = 1 + (to - from) + (closed ? 1 : 0);
      if (ps.buf.size() < len + kPad) ps.buf.resize(len + kPad);
      ps.buf[0] = '[';
      std::memcpy(ps.buf.data() + 1, text.data() + from, to - from);
      if (closed) ps.buf[len - 1] = ']';
      std::memset(ps.buf.data() + len, 0, kPad);
      const JsonWalk w = ps.walker.elements(ps.buf.data(), len, len + kPad, *this, close);
      restart = w.element_at == kNoPos ? kNoPos : from - 1 + w.element_at;
      if (w.ok) return closed && close == len - 1 ? Piece::Whole : Piece::Ended;
      // An element walked whole, then an error: not a place a guess leaves (malformed text).
      return w.element_whole ? Piece::Malformed : Piece::Failed;
    };
    const bool bounded = bound.first != kNoPos;
    int misses = 0;  // guesses in a row that failed before any element
    for (std::size_t from = p + kPiece;;) {
      if (stop && stop->load(std::memory_order_relaxed)) return {Run::Stopped, p, 0};
      std::size_t close = 0, restart = kNoPos;
      text = upto(from + kLook);
      auto [end, next] = guess(text, from);
      // None in the text ready: more of it, the search going on from near where it stopped.
      for (std::size_t had = 0; next == 0 && text.size() > had && text.size() >= from + kLook;) {
        had = text.size();
        text = upto(had + kLook);
        std::tie(end, next) = guess(text, std::max(from, had - 64));
      }
      if (bounded && (next == 0 || end >= bound.first)) std::tie(end, next) = bound;
      if (next != 0 && misses < 8) {
        const Piece r = piece(p, end, true, close, restart);
        if (r == Piece::Whole) {
          p = next;
          if (bounded && next == bound.second) return {Run::Bound, p, 0};
          from = p + kPiece;
          misses = 0;
          continue;
        }
        if (r == Piece::Ended) return {Run::Ended, p, p - 1 + close};  // the guess lay past the events (in an array after them)
        if (r == Piece::Malformed) return {Run::Malformed, p, 0};
        at_events();                        // the element that failed is walked again from its start
        if (bounded && end == bound.first)  // the bound ends no element here: stopped where the whole ones end
          return {Run::Stopped, restart != kNoPos && restart > p ? restart : p, 0};
        if (restart == kNoPos) {  // a string left open: the next guess
          ++misses;
          from = end;
        } else if (restart > p) {
          p = restart;
          from = p + kPiece;
          misses = 0;
        } else
          from = end, ++misses;  // the first element holds the guess: a longer piece
        continue;
      }
      if (bounded) return {Run::Stopped, p, 0};
      text = upto(kAll);
      const std::size_t last_bracket = text.rfind(']');
      if (last_bracket == std::string_view::npos || last_bracket < p) return {Run::Malformed, p, 0};
      if (piece(p, last_bracket + 1, false, close, restart) != Piece::Ended) return {Run::Malformed, p, 0};
      return {Run::Ended, p, p - 1 + close};
    }
  }

  // A second thread's round: the events of [p, its bound or the events' end) kept as records:
  // each its scalars, where its text starts in `text` (each text field's length, then its bytes)
  // and where its shapes start in `ints` (their count, then each one's length and values). The
  // first `n` records are the round's; a round reuses the memory of the one before.
  struct Rec : EvScalars {
    bool py = false;       // a Python frame the walk would pass over once one is noted
    bool counted = false;  // a Python frame passed over (one was noted before the round began)
    std::size_t text_at = 0, ints_at = 0;
  };
  struct Round {
    Run run;
    std::vector<Rec> recs;
    std::vector<char> text;
    std::vector<std::int64_t> ints;
    std::size_t n = 0;
    std::thread thread;
    std::atomic<bool> stop{false};
    std::unique_ptr<Reader> side;  // its reader and parser, kept from round to round
    std::unique_ptr<Pieces> pieces;
  };
  void start_round(Round& r, const std::function<std::string_view(std::size_t)>& upto, std::size_t p,
                   std::pair<std::size_t, std::size_t> bound) {
    r.n = 0;
    r.text.clear();
    r.ints.clear();
    r.stop = false;
    if (!r.side) {
      ImportOptions quiet = opt_;
      quiet.progress = false;
      r.side = std::make_unique<Reader>(path_, quiet);
      r.side->sink_ = &r;
      r.pieces = std::make_unique<Pieces>();
    }
    r.side->python_noted_ = python_noted_;  // then it stays so: the round's frames are passed over
    r.thread = std::thread([&r, upto, p, bound] {
      Reader& side = *r.side;
      side.at_events();
      try {
        r.run = side.run_pieces(upto, *r.pieces, p, bound, &r.stop);
      } catch (...) {  // an event's own error: read again by the first thread, which says it as one thread does
        r.run = {Run::Stopped, p, 0};
        r.n = 0;
      }
      // Malformed text: the records before it kept (a record is made at an event's end), the
      // first thread goes on from there and finds it.
      if (r.run.kind == Run::Malformed) r.run.kind = Run::Stopped;
    });
  }
  void keep(Round& r) {
    if (r.n == r.recs.size()) r.recs.emplace_back();
    Rec& k = r.recs[r.n++];
    static_cast<EvScalars&>(k) = ev_;
    k.py = py_candidate_;
    k.counted = python_counted_;
    k.text_at = r.text.size();
    for (std::string Ev::*f : kStrings) {
      const std::string& v = ev_.*f;
      const auto len = static_cast<std::uint32_t>(v.size());
      r.text.insert(r.text.end(), reinterpret_cast<const char*>(&len), reinterpret_cast<const char*>(&len) + sizeof len);
      r.text.insert(r.text.end(), v.begin(), v.end());
    }
    k.ints_at = r.ints.size();
    r.ints.push_back(static_cast<std::int64_t>(ev_.dims_n));
    for (std::size_t d = 0; d < ev_.dims_n; ++d) {
      r.ints.push_back(static_cast<std::int64_t>(ev_.dims[d].size()));
      r.ints.insert(r.ints.end(), ev_.dims[d].begin(), ev_.dims[d].end());
    }
  }
  // The second thread's events made into ops here, in their order.
  void take_round(Round& r) {
    for (std::size_t i = 0; i < r.n; ++i) {
      const Rec& k = r.recs[i];
      static_cast<EvScalars&>(ev_) = k;
      const char* t = r.text.data() + k.text_at;
      for (std::string Ev::*f : kStrings) {
        std::uint32_t len = 0;
        std::memcpy(&len, t, sizeof len);
        (ev_.*f).assign(t + sizeof len, len);
        t += sizeof len + len;
      }
      const std::int64_t* x = r.ints.data() + k.ints_at;
      const auto dims = static_cast<std::size_t>(*x++);
      ev_.dims_n = 0;
      for (std::size_t d = 0; d < dims; ++d) {
        ev_.add_dim();
        const auto len = static_cast<std::size_t>(*x++);
        ev_.dims[d].assign(x, x + len);
        x += len;
      }
      python_counted_ = k.counted || (k.py && python_noted_);
      if (python_counted_) ev_.ph = 'X';  // its other members not read (as the walk passes over them)
      event();
    }
    r.n = 0;
  }

  bool in_pieces(const std::function<std::string_view(std::size_t)>& upto, const std::function<bool()>& complete) {
    constexpr std::size_t kMin = std::size_t{8} << 20;
    std::string_view text = upto(kMin);
    if (text.size() < kMin) return false;
    const std::size_t key = text.find("\"traceEvents\"");
    if (key == std::string_view::npos) return false;
    std::size_t open = ws(text, key + 13);
    if (open >= text.size() || text[open] != ':') return false;
    open = ws(text, open + 1);
    if (open >= text.size() || text[open] != '[') return false;
    std::size_t p = ws(text, open + 1);
    if (p >= text.size() || text[p] != '{') return false;
    at_events();
    saw_events_ = true;
    Pieces ps;
    std::size_t close_at = 0;  // the events array's closing bracket in `text`
    // Rounds on two threads (above): the second thread's next round starts before this thread
    // makes the ops of its last one.
    const std::size_t round = opt_.json_round;
    Round rounds[2];
    Round* taken = nullptr;  // joined, its events not yet made into ops (they come before `p`)
    struct Joiner {          // the second thread is joined on every way out
      Round* r;
      ~Joiner() {
        for (int i = 0; i < 2; ++i)
          if (r[i].thread.joinable()) {
            r[i].stop = true;
            r[i].thread.join();
          }
      }
    } joiner{rounds};
    auto take = [&] {
      if (taken) take_round(*taken);
      taken = nullptr;
    };
    int next_round = 0;
    bool whole_text = false;  // `text` is the whole document
    for (bool two = round > 0 && std::thread::hardware_concurrency() > 1;;) {
      if (two && !whole_text) {
        if (complete()) {
          text = upto(kAll);
          whole_text = true;
          continue;
        }
        // A gzip stream still inflating: one thread, a round at a time, until it is whole.
        text = upto(p + round + kLook);
        const auto b = guess(text, p + round);
        if (b.second == 0) {  // none in the text ready: the stream ended (or failed) meanwhile
          two = complete();
          continue;
        }
        if (complete()) continue;  // whole now: the rounds on two threads
        const Run r = run_pieces(upto, ps, p, b);
        if (r.kind == Run::Malformed) return false;
        if (r.kind == Run::Ended) {
          close_at = r.close_at;
          break;
        }
        two = r.p > p;  // stopped where no element was walked: one thread from there
        p = r.p;
        continue;
      }
      const std::size_t left = text.size() > p ? text.size() - p : 0;
      if (!two || left < 2 * kPiece + kPiece / 2 || left < round / 4) {
        take();
        const Run r = run_pieces(upto, ps, p);
        if (r.kind != Run::Ended) return false;
        close_at = r.close_at;
        break;
      }
      // This thread's part, then the second thread's (about 45 and 55 %: this thread also makes
      // the ops of both); the last round's second part runs to the events' end.
      const bool last = left < round + round / 4;
      const auto mine = guess(text, p + (last ? left : round) * 9 / 20);
      const auto theirs =
          last || mine.second == 0 ? std::pair<std::size_t, std::size_t>{kNoPos, kNoPos} : guess(text, mine.second + round * 11 / 20);
      if (mine.second == 0 || theirs.second == 0) {
        two = false;
        continue;
      }
      Round& side = rounds[next_round];
      next_round ^= 1;
      start_round(side, upto, mine.second, theirs);
      take();
      const Run r = run_pieces(upto, ps, p, mine);
      if (r.kind != Run::Bound) {
        side.stop = true;
        side.thread.join();
        if (r.kind == Run::Malformed) return false;
        if (r.kind == Run::Ended) {  // the guess lay past the events
          close_at = r.close_at;
          break;
        }
        // The guess ends no element (it lay in a string): rounds go on from where the elements
        // walked whole end, or one thread where none was.
        two = r.p > p;
        p = r.p;
        continue;
      }
      side.thread.join();
      taken = &side;
      if (side.run.kind == Run::Ended) {
        take();
        close_at = side.run.close_at;
        break;
      }
      if (side.run.kind == Run::Stopped) two = side.run.p > mine.second;  // as above
      p = side.run.p;                                                     // its bound, or where the second thread stopped
    }
    depth_ = 0;
    top_ = Top::None;
    top_key_ = TopKey::Other;
    // The rest of the document, its events array replaced by [0].
    text = upto(kAll);
    std::string rest;
    rest.reserve(open + 2 + (text.size() - close_at) + kPad);
    rest.append(text.substr(0, open + 1)).append("0").append(text.substr(close_at));
    const std::size_t len = rest.size();
    rest.append(kPad, '\0');
    sentinel_ = rest.data() + open + 1;
    const JsonWalk w = walk_json(rest.data(), len, rest.size(), *this);
    sentinel_ = nullptr;
    return w.ok && sentinel_seen_;
  }

  // ---- SAX -----------------------------------------------------------------------------------
  bool null() override {
    field_ = Field::None;
    return true;
  }
  bool boolean(bool) override {
    field_ = Field::None;
    return true;
  }
  bool number_integer(std::int64_t v) override { return integer(v, nullptr); }
  bool number_unsigned(std::uint64_t v) override {
    return integer(v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ? -1 : static_cast<std::int64_t>(v), nullptr);
  }
  bool number_float(double v, std::string_view s) override {
    if (field_ == Field::Ts || field_ == Field::Dur) return integer(0, &s);
    return integer(static_cast<std::int64_t>(std::llround(v)), nullptr);
  }
  bool string(std::string_view v) override {
    switch (field_) {
      case Field::Ph:
        ev_.ph = v.empty() ? 0 : v[0];
        // An event of another phase (flows "s"/"f": 2 of every 5 events of a profile) is not read:
        // the rest of its members are passed over.
        skip_rest_ = depth_ == 3 && in_event_ && ev_.ph != 'X' && ev_.ph != 'M' && ev_.ph != 'i';
        break;
      case Field::Cat:
        ev_.cat = cat_of(v);
        ev_.has_cat = true;
        python_frame_seen();
        break;
      case Field::Name:
        ev_.name.assign(v);
        python_frame_seen();
        break;
      case Field::Pid:  // "Spans", "Traces": not an activity; the legacy profiler's host rows: "CPU functions"
        ev_.pid_num = v == "CPU functions";
        if (ev_.pid_num) ev_.pid = 0, ev_.legacy_cpu = true;
        break;
      case Field::Tid:
        ev_.tid = static_cast<std::int64_t>(std::hash<std::string_view>{}(v)&0x7FFFFFFF);
        ev_.tid_num = true;
        break;
      case Field::Ts:
      case Field::Dur: return integer(0, &v);
      case Field::SyncKind: ev_.sync_kind.assign(v); break;
      case Field::ArgName: ev_.arg_name.assign(v); break;
      case Field::Kind: ev_.memkind.assign(v); break;
      case Field::InType:
        if (ev_.in_type.empty()) ev_.in_type.assign(v);
        break;
      case Field::Concrete:
        if (ev_.concrete.size() < 256) ev_.concrete.append(v).push_back('|');
        break;
      case Field::CollName: ev_.coll_name.assign(v); break;
      case Field::Dtype: ev_.dtype.assign(v); break;
      case Field::PgName: ev_.pg_name.assign(v); break;
      case Field::PgRanks:
        if (list_field_) {
          if (!ev_.pg_ranks.empty()) ev_.pg_ranks += ',';
          ev_.pg_ranks += v;
        } else
          ev_.pg_ranks.assign(v);
        break;
      case Field::Stream: ev_.stream = parse_int_text(v); break;  // ROCm: "0x0"
      case Field::Bytes: ev_.bytes = parse_int_text(v); break;
      case Field::DevName: dev_.name.assign(v); break;
      default: break;
    }
    if (!list_field_) field_ = Field::None;
    return true;
  }

  // Depths: the root object is 1, traceEvents/deviceProperties arrays and distributedInfo 2,
  // an event or a device 3, an event's args 4, arrays inside args 5 (Input Dims' inner lists 6).
  bool start_object() override {
    ++depth_;
    if (depth_ == 3 && top_ == Top::Events) {
      ev_.reset();
      python_counted_ = py_candidate_ = false;
      in_event_ = true;
    } else if (depth_ == 3 && top_ == Top::Devices) {
      dev_ = Device{};
      in_device_ = true;
    } else if (depth_ == 4 && in_event_ && args_key_)
      in_args_ = true;
    field_ = Field::None;
    return true;
  }
  bool end_object() override {
    if (depth_ == 3 && in_event_) {
      in_event_ = false;
      if (sink_)  // a second thread's walk: the event kept for the reading thread
        keep(*sink_);
      else
        event();
    } else if (depth_ == 3 && in_device_) {
      in_device_ = false;
      devices_.push_back(dev_);
    } else if (depth_ == 4 && in_args_)
      in_args_ = false;
    --depth_;
    field_ = Field::None;
    return true;
  }
  bool start_array() override {
    if (depth_ == 0) {  // a bare array of events: read as the traceEvents of an object around it
      depth_ = 2;
      bare_ = true;
      top_ = Top::Events;
      saw_events_ = true;
      t_.note("kineto: a bare array of events (no traceEvents object)", Severity::Info, "read as its traceEvents");
      return true;
    }
    ++depth_;
    if (depth_ == 2 && top_key_ == TopKey::Events) {
      top_ = Top::Events;
      saw_events_ = true;
    } else if (depth_ == 2 && top_key_ == TopKey::Devices)
      top_ = Top::Devices;
    else if (in_args_ && depth_ == 5) {
      if (field_ == Field::Grid || field_ == Field::Block) {
        list_field_ = true;
        list_pos_ = 0;
      } else if (field_ == Field::Dims) {
        ev_.has_dims = true;
        list_field_ = true;
      } else if (field_ == Field::InType || field_ == Field::Concrete)
        list_field_ = true;
      else if (field_ == Field::PgRanks) {
        ev_.pg_ranks.clear();
        list_field_ = true;
      } else
        field_ = Field::None;
    } else if (in_args_ && depth_ >= 6 && field_ == Field::Dims) {
      // One shape per input; a tensor list ([[[2048, 2048], [2048]], ...]) gives one per tensor.
      if (depth_ > 6 && ev_.dims_n > 0 && ev_.dims[ev_.dims_n - 1].empty()) --ev_.dims_n;
      ev_.add_dim();
    }
    return true;
  }
  bool end_array() override {
    if (bare_ && depth_ == 2) {
      top_ = Top::None;
      depth_ = 0;
      return true;
    }
    if (depth_ == 2) top_ = Top::None;
    if (in_args_ && depth_ == 5) {
      list_field_ = false;
      field_ = Field::None;
    }
    --depth_;
    return true;
  }
  bool skip_rest() override {
    const bool r = skip_rest_;
    skip_rest_ = false;
    return r;
  }
  bool element(const char* at, bool& skip) override {
    skip = false;
    if (sentinel_ && at == sentinel_) {
      sentinel_seen_ = depth_ == 2 && top_ == Top::Events && top_key_ == TopKey::Events;
      skip = true;
    }
    return true;
  }
  bool key(std::string_view k, bool& skip) override {
    args_key_ = false;
    bool container = false;  // a value the handlers walk into for what it holds
    if (depth_ == 1) {
      top_key_ = k == "traceEvents"        ? TopKey::Events
                 : k == "deviceProperties" ? TopKey::Devices
                 : k == "distributedInfo"  ? TopKey::Dist
                                           : TopKey::Other;
      field_ = Field::None;
      top_ = Top::None;
      container = top_key_ != TopKey::Other;
    } else if (depth_ == 2 && top_key_ == TopKey::Dist)
      field_ = k == "rank" ? Field::Rank : k == "world_size" ? Field::WorldSize : Field::None;
    else if (depth_ == 3 && in_event_) {
      // Not read where the event's phase or category is known to need none of it: the args of
      // instant events and Python frames (with_stack: half the events of such a profile).
      const bool python = ev_.has_cat && ev_.cat == Cat::Python;
      args_key_ = container = k == "args" && ev_.ph != 'i' && !python;
      field_ = event_field(k);  // "args" is no field
    } else if (depth_ == 3 && in_device_)
      field_ = device_field(k);
    else if (depth_ == 4 && in_args_)
      field_ = arg_field(k);
    else
      field_ = Field::None;
    skip = field_ == Field::None && !container;
    return true;
  }
  void parse_error(std::size_t pos, const std::string& what) {
    if (!error_.empty()) return;  // a handler's own error stands
    error_ =
        "malformed JSON at byte " + std::to_string(pos) + (events_ ? " (after event " + std::to_string(events_) + ")" : "") + ": " + what;
  }

 private:
  enum class Top : std::uint8_t { None, Events, Devices };

  static std::int64_t parse_int_text(std::string_view text) {
    const std::string v(text);
    try {
      std::size_t pos = 0;
      long long x = std::stoll(v, &pos, 0);
      return x;
    } catch (const std::exception&) { return -1; }
  }

  // Integer microseconds to nanoseconds, refusing what would overflow.
  static TimeNs us_to_ns(std::int64_t v) {
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max() / 1000;
    if (v > kMax || v < -kMax) throw InputError("timestamp " + std::to_string(v) + " us out of range");
    return v * 1000;
  }
  bool integer(std::int64_t v, const std::string_view* text) {
    try {
      switch (field_) {
        case Field::Ts:
          ev_.ts = text ? kineto_us_to_ns(*text) : us_to_ns(v);
          ev_.has_ts = true;
          break;
        case Field::Dur:
          ev_.dur = text ? kineto_us_to_ns(*text) : us_to_ns(v);
          ev_.has_dur = true;
          break;
        default: break;
      }
    } catch (const InputError& e) { throw InputError(path_, "event " + std::to_string(events_ + 1) + ": " + e.what()); }
    switch (field_) {
      case Field::Pid:
        ev_.pid = v;
        ev_.pid_num = true;
        break;
      case Field::Tid:
        ev_.tid = v;
        ev_.tid_num = true;
        break;
      case Field::Corr: ev_.correlation = v; break;
      case Field::Stream: ev_.stream = v; break;
      case Field::Device: ev_.device = v; break;
      case Field::Bytes: ev_.bytes = v; break;
      case Field::WaitStream: ev_.wait_on_stream = v; break;
      case Field::WaitRecord: ev_.wait_record_corr = v; break;
      case Field::WaitEvent: ev_.wait_event_id = v; break;
      case Field::Regs: ev_.regs = v; break;
      case Field::Smem: ev_.smem = v; break;
      case Field::Grid:
        if (list_pos_ < 3) ev_.grid[list_pos_++] = v;
        return true;
      case Field::Block:
        if (list_pos_ < 3) ev_.block[list_pos_++] = v;
        return true;
      case Field::Dims:
        if (ev_.dims_n > 0) ev_.dims[ev_.dims_n - 1].push_back(v);
        return true;
      case Field::PgRanks: ev_.pg_ranks += (ev_.pg_ranks.empty() ? "" : ",") + std::to_string(v); return true;
      case Field::InNelems: ev_.in_nelems = v; break;
      case Field::OutNelems: ev_.out_nelems = v; break;
      case Field::GroupSize: ev_.group_size = v; break;
      case Field::DevId: dev_.id = static_cast<std::uint32_t>(v); break;
      case Field::DevSms: dev_.sm_count = static_cast<std::uint32_t>(v); break;
      case Field::DevMem: dev_.memory_bytes = static_cast<Bytes>(v); break;
      case Field::DevMajor: dev_.cc_major = static_cast<std::uint32_t>(v); break;
      case Field::DevMinor: dev_.cc_minor = static_cast<std::uint32_t>(v); break;
      case Field::DevMaxThreads: dev_.max_threads_per_block = static_cast<std::uint32_t>(v); break;
      case Field::DevRegs: dev_.regs_per_sm = static_cast<std::uint32_t>(v); break;
      case Field::DevSmem: dev_.smem_per_sm = static_cast<Bytes>(v); break;
      case Field::DevThreadsPerSm: dev_.max_warps_per_sm = static_cast<std::uint32_t>(v / 32); break;
      case Field::Rank: rank_ = static_cast<std::uint32_t>(v); break;
      case Field::WorldSize:
        if (v > 0) world_size_ = static_cast<std::uint32_t>(std::min<std::int64_t>(v, 1 << 24));
        break;
      default: break;
    }
    if (!list_field_) field_ = Field::None;
    return true;
  }

  // ---- lanes -----------------------------------------------------------------------------
  std::uint32_t process_index(std::int64_t pid) {
    auto it = process_.find(pid);
    if (it != process_.end()) return it->second;
    Process p;
    p.pid = static_cast<std::uint64_t>(pid);
    auto idx = static_cast<std::uint32_t>(t_.processes.size());
    t_.processes.push_back(p);
    process_.emplace(pid, idx);
    return idx;
  }
  LaneId thread_lane(std::int64_t pid, std::int64_t tid) {
    auto key = std::make_pair(pid, tid);
    auto it = thread_lane_.find(key);
    if (it != thread_lane_.end()) return it->second;
    Lane l;
    l.kind = LaneKind::Thread;
    l.process = process_index(pid);
    l.native_id = static_cast<std::uint64_t>(tid);
    auto id = static_cast<LaneId>(t_.lanes.size());
    t_.lanes.push_back(l);
    thread_lane_.emplace(key, id);
    return id;
  }
  std::uint32_t device_index(std::int64_t dev) {
    auto it = device_.find(dev);
    if (it != device_.end()) return it->second;
    Device d;
    d.id = static_cast<std::uint32_t>(std::max<std::int64_t>(0, dev));
    auto idx = static_cast<std::uint32_t>(t_.devices.size());
    t_.devices.push_back(d);
    device_.emplace(dev, idx);
    return idx;
  }
  LaneId stream_lane(std::int64_t dev, std::int64_t stream) {
    auto key = std::make_pair(dev, stream);
    auto it = stream_lane_.find(key);
    if (it != stream_lane_.end()) return it->second;
    Lane l;
    l.kind = LaneKind::Stream;
    l.process = host_process_;
    l.device = device_index(dev);
    l.native_id = static_cast<std::uint64_t>(stream);
    auto id = static_cast<LaneId>(t_.lanes.size());
    t_.lanes.push_back(l);
    stream_lane_.emplace(key, id);
    return id;
  }

  // ---- events ----------------------------------------------------------------------------
  void event() {
    ++events_;
    if ((events_ & 0xFFFFF) == 0) progress_.phase("reading events", events_);
    if (ev_.ph == 'M') {
      if (ev_.name == "process_name" && ev_.pid_num) names_.emplace_back(ev_.pid, ev_.arg_name);
      return;
    }
    if (ev_.ph == 'i' && ev_.name == "[memory]") {
      t_.note(kKinetoMemoryNote, Severity::Info, "event " + std::to_string(events_));
      return;
    }
    if (python_counted_) {  // not read past its category
      note_python();
      return;
    }
    // The legacy profiler (export_chrome_trace of torch.autograd.profiler, PyTorch 1.8 and before):
    // host ops on "CPU functions" with no category are op ranges (ProfilerStep#N among them).
    if (ev_.legacy_cpu && !ev_.has_cat) {
      ev_.cat = Cat::CpuOp;
      ev_.has_cat = true;
      ++legacy_;
    }
    if (ev_.ph != 'X' || !ev_.has_cat || !ev_.pid_num || !ev_.has_ts) return;
    if (!ev_.has_dur) ev_.dur = 0;
    if (ev_.dur < 0) {
      t_.note("kineto: event with a negative duration", Severity::Warning, "event " + std::to_string(events_) + " (" + ev_.name + ")");
      return;
    }
    switch (ev_.cat) {
      case Cat::Runtime:
      case Cat::Driver: api(); break;
      case Cat::Kernel:
      case Cat::Memcpy:
      case Cat::Memset: device_op(); break;
      case Cat::Sync:
        if (ev_.correlation >= 0)
          syncs_.push_back(Sync{ev_.correlation, ev_.sync_kind, ev_.device, ev_.stream, ev_.wait_on_stream, ev_.wait_record_corr});
        break;
      case Cat::UserAnno:
      case Cat::CpuOp: range(); break;
      case Cat::Python:
        if (module_frame()) module_range();
        note_python();
        break;
      default: break;
    }
  }

  // A complete event of a Python frame (with_stack: most events of such a profile) after the first
  // is only counted once its category and name are known: the rest of its members are passed over,
  // except a module's ("nn.Module: <class>_<k>", with_modules), which is read as a range.
  // A second thread's walk that starts before a frame is noted reads such an event whole and marks
  // it: whether it is passed over is known only where the events are made into ops, in order
  // (take_round); one that starts after passes over it as this thread does.
  void python_frame_seen() {
    if (depth_ == 3 && in_event_ && ev_.ph == 'X' && ev_.has_cat && ev_.cat == Cat::Python && !ev_.name.empty() && !module_frame()) {
      if (python_noted_)
        skip_rest_ = python_counted_ = true;
      else if (sink_)
        py_candidate_ = true;
    }
  }
  bool module_frame() const { return module_range_name(ev_.name); }

  // A module's forward (the profiler's "nn.Module: Qwen2DecoderLayer_3"): a range on its thread,
  // named as the trace names it (the structure search finds a model's layers in them).
  void module_range() { push_range(ev_.name); }

  // The event as a range of that name on its thread.
  void push_range(std::string_view name) {
    Range r;
    r.start = ev_.ts;
    r.end = ev_.ts + ev_.dur;
    r.lane = thread_lane(ev_.pid, ev_.tid);
    r.name = t_.strings.intern(name);
    t_.ranges.push_back(r);
  }

  // A Python frame (with_stack): counted, the first one the note's example.
  void note_python() {
    if (python_noted_) {
      t_.note(kKinetoStackNote, Severity::Info, std::string());
      return;
    }
    t_.note(kKinetoStackNote, Severity::Info, "event " + std::to_string(events_) + " (" + ev_.name + ")");
    python_noted_ = true;
  }

  void api() {
    if (host_process_ == kNone) host_process_ = process_index(ev_.pid);
    Op op;
    op.kind = OpKind::Api;
    op.start = ev_.ts;
    op.set_duration(ev_.dur);
    op.lane = thread_lane(ev_.pid, ev_.tid);
    auto it = api_names_.find(ev_.name);
    if (it == api_names_.end()) {
      std::string n = ev_.name;
      std::string c = n.rfind("hip", 0) == 0 ? "cuda" + n.substr(3) : n;  // ROCm: hipLaunchKernel -> cudaLaunchKernel
      ApiClass cls = classify_cuda_api(strip_api_suffix(c));
      if (cls == ApiClass::Other && c.find("LaunchKernel") != std::string::npos) cls = ApiClass::Launch;
      it = api_names_.emplace(n, std::make_pair(t_.strings.intern(n), cls)).first;
    }
    op.name = it->second.first;
    op.set_api_class(it->second.second);
    auto id = static_cast<OpId>(t_.ops.size());
    t_.ops.push_back(op);
    if (ev_.correlation >= 0 && !api_by_corr_.emplace(ev_.correlation, id).second)
      t_.note("kineto: duplicate correlation id among API calls", Severity::Warning, "correlation " + std::to_string(ev_.correlation));
  }

  void device_op() {
    Op op;
    op.start = ev_.ts;
    op.set_duration(ev_.dur);
    std::int64_t dev = ev_.device >= 0 ? ev_.device : ev_.pid;
    std::int64_t stream = ev_.stream >= 0 ? ev_.stream : ev_.tid;
    op.lane = stream_lane(dev, stream);
    op.name = t_.strings.intern(ev_.name);
    if (ev_.cat == Cat::Kernel) {
      op.kind = OpKind::Kernel;
      LaunchConfig lc;
      for (int i = 0; i < 3; ++i) lc.set_grid(i, static_cast<std::uint64_t>(std::max<std::int64_t>(1, ev_.grid[i])));
      for (int i = 0; i < 3; ++i) lc.block[i] = static_cast<std::uint16_t>(std::clamp<std::int64_t>(ev_.block[i], 1, 0xFFFF));
      lc.registers = static_cast<std::uint16_t>(std::clamp<std::int64_t>(ev_.regs, 0, 0xFFFF));
      lc.dynamic_smem = static_cast<std::uint32_t>(std::clamp<std::int64_t>(ev_.smem, 0, 0xFFFFFFFF));
      op.extra = launches_.intern(t_.kernels, lc);
      if (is_comm_kernel_name(ev_.name)) op.flags |= Op::kFlagNccl;
    } else {
      op.kind = ev_.cat == Cat::Memcpy ? OpKind::Memcpy : OpKind::Memset;
      CopyInfo ci;
      ci.bytes = static_cast<Bytes>(std::max<std::int64_t>(0, ev_.bytes));
      // "Memcpy HtoD (Pinned -> Device)"; ROCm: "Memcpy HtoD (Host -> Device)" with args.kind.
      const std::string& n = ev_.name;
      auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
      if (op.kind == OpKind::Memcpy) {
        ci.copy_kind = has("HtoD")   ? MemcpyKind::HtoD
                       : has("DtoH") ? MemcpyKind::DtoH
                       : has("DtoD") ? MemcpyKind::DtoD
                       : has("PtoP") ? MemcpyKind::PtoP
                       : has("HtoH") ? MemcpyKind::HtoH
                                     : MemcpyKind::Unknown;
        auto side = [&](std::string_view s) {
          return s.find("Pageable") != std::string_view::npos  ? MemKind::Pageable
                 : s.find("Pinned") != std::string_view::npos  ? MemKind::Pinned
                 : s.find("Device") != std::string_view::npos  ? MemKind::Device
                 : s.find("Managed") != std::string_view::npos ? MemKind::Managed
                                                               : MemKind::Unknown;
        };
        auto p = n.find('('), a = n.find("->");
        if (p != std::string::npos && a != std::string::npos && a > p) {
          ci.src = side(std::string_view(n).substr(p, a - p));
          ci.dst = side(std::string_view(n).substr(a));
        }
      } else {
        ci.dst = MemKind::Device;
      }
      op.extra = static_cast<std::uint32_t>(t_.copies.size());
      t_.copies.push_back(ci);
    }
    auto id = static_cast<OpId>(t_.ops.size());
    t_.ops.push_back(op);
    if (ev_.correlation >= 0)
      pending_.emplace_back(id, ev_.correlation);
    else
      t_.note("kineto: device op without a correlation id", Severity::Info, "event " + std::to_string(events_) + " (" + ev_.name + ")");
  }

  void range() {
    std::string name;
    if (ev_.cat == Cat::UserAnno) {
      name = ev_.name;
      if (ev_.name.rfind("nccl:", 0) == 0 && ev_.has_dims) {
        name += ", sizes = ";
        append_dims(name, ev_.dims, ev_.dims_n);
        if (!ev_.in_type.empty()) name += ", dtype = " + ev_.in_type;
      }
    } else if (ev_.name == "record_param_comms" || !ev_.coll_name.empty()) {
      name = "record_param_comms, collective = " + ev_.coll_name + ", in_nelems = " + std::to_string(ev_.in_nelems) +
             ", out_nelems = " + std::to_string(ev_.out_nelems) + ", dtype = " + ev_.dtype + ", group = " + ev_.pg_name +
             ", group_ranks = [" + ev_.pg_ranks + "], group_size = " + std::to_string(ev_.group_size);
    } else if (ev_.has_dims && ev_.dims_n > 0) {
      name.reserve(ev_.name.size() + 64);
      name.append(ev_.name).append(", sizes = ");
      append_dims(name, ev_.dims, ev_.dims_n);
      // A convolution's output shape needs its stride, padding and dilation (scalar arguments)
      if (!ev_.concrete.empty() && ev_.name.find("convolution") != std::string::npos) name.append(", args = ").append(ev_.concrete);
    } else if (ev_.name.rfind("torch.distributed.ddp.reducer::", 0) == 0) {
      name = ev_.name;  // DDP's reducer steps (copy_bucket_to_grad: after the bucket all-reduces)
    } else if (ev_.name.rfind("ProfilerStep#", 0) == 0) {
      name = ev_.name;  // the profiler's steps as PyTorch 1.9 and the legacy profiler record them (an op)
    } else if (ev_.name.rfind("enumerate(DataLoader)#", 0) == 0) {
      name = ev_.name;  // the input pipeline's next batch, as PyTorch 1.8-1.9 record it (an op; a user_annotation since)
    } else {
      t_.unnamed_ops.emplace_back(thread_lane(ev_.pid, ev_.tid), ev_.ts);  // a cpu_op without shapes: counted, not named
      return;
    }
    push_range(name);
  }

  void finish() {
    if (host_process_ == kNone && !t_.processes.empty()) host_process_ = 0;
    for (auto& l : t_.lanes)
      if (l.kind == LaneKind::Stream && l.process == kNone) l.process = host_process_ == kNone ? 0 : host_process_;
    if (t_.processes.empty()) process_index(0);
    for (auto& [pid, n] : names_) {
      auto it = process_.find(pid);
      if (it != process_.end()) t_.processes[it->second].name = n;
    }
    if (rank_ != kNone && host_process_ != kNone) t_.processes[host_process_].rank = rank_;
    if (world_size_ > 0 && host_process_ != kNone) t_.processes[host_process_].world_size = world_size_;
    if (legacy_ > 0) t_.note("kineto: the legacy profiler's host ops (\"CPU functions\")", Severity::Info, "read as op ranges", legacy_);
    // Device properties by id; a device the properties do not list (a process that sees one GPU of
    // a node by another id, a virtual function) takes them where they all name one GPU.
    bool one_kind = !devices_.empty();
    for (const auto& p : devices_) one_kind = one_kind && p.name == devices_[0].name && !p.name.empty();
    for (auto& d : t_.devices) {
      bool found = false;
      for (const auto& p : devices_)
        if (p.id == d.id) {
          std::uint32_t id = d.id;
          d = p;
          d.id = id;
          found = true;
        }
      if (!found && one_kind) {
        t_.note("kineto: device without its properties", Severity::Info,
                "device " + std::to_string(d.id) + " takes those of device " + std::to_string(devices_[0].id) + " (" + devices_[0].name +
                    "): every GPU the properties list is one");
        std::uint32_t id = d.id;
        d = devices_[0];
        d.id = id;
      }
    }
    if (t_.devices.empty() && !devices_.empty()) t_.devices.push_back(devices_[0]);
    std::uint64_t unlinked = 0;
    for (auto [op_id, corr] : pending_) {
      auto it = api_by_corr_.find(corr);
      if (it == api_by_corr_.end()) {
        if (unlinked++ == 0)
          t_.note("kineto: device op without a launching API call", Severity::Info,
                  t_.strings.str(t_.ops[op_id].name) + " (correlation " + std::to_string(corr) + ")");
        else
          t_.anomalies["kineto: device op without a launching API call"].count++;
        continue;
      }
      t_.ops[op_id].link = it->second;
      Op& api = t_.ops[it->second];
      if (api.api_class() == ApiClass::GraphLaunch) t_.ops[op_id].flags |= Op::kFlagGraphNode;
      // A cudaMemcpyAsync touching pageable host memory returns only when the copy is done.
      const CopyInfo* ci = t_.copy(t_.ops[op_id]);
      if (ci && t_.ops[op_id].kind == OpKind::Memcpy && api.api_class() == ApiClass::MemcpyAsync && ci->pageable())
        api.set_api_class(ApiClass::MemcpySync);
    }
    // Synchronizations: the cuda_sync record of an API call says what it waited on.
    for (const Sync& s : syncs_) {
      auto it = api_by_corr_.find(s.corr);
      if (it == api_by_corr_.end()) {
        t_.note("kineto: synchronization without its API call", Severity::Info, "correlation " + std::to_string(s.corr));
        continue;
      }
      Op& op = t_.ops[it->second];
      const OpId self = it->second;
      // Re-fetched at each use: record() may grow t_.apis.
      auto info = [&]() -> ApiInfo& { return t_.api_info_for(self); };
      std::int64_t dev = s.device >= 0 ? s.device : 0;
      auto record = [&](std::int64_t corr, std::int64_t stream) {
        auto r = api_by_corr_.find(corr);
        if (r == api_by_corr_.end() || stream < 0) return false;
        ApiInfo& ri = t_.api_info_for(r->second);
        ri.stream = stream_lane(dev, stream);
        ri.event = static_cast<std::uint64_t>(corr);
        ri.has_event = true;
        t_.ops[r->second].set_api_class(ApiClass::EventRecord);
        return true;
      };
      if (s.kind == "Stream Wait Event") {
        if (s.stream >= 0 && s.record_corr >= 0 && record(s.record_corr, s.wait_stream)) {
          op.set_api_class(ApiClass::StreamWait);
          info().stream = stream_lane(dev, s.stream);
          info().event = static_cast<std::uint64_t>(s.record_corr);
          info().has_event = true;
        } else {
          t_.note("kineto: stream wait whose event record is unknown", Severity::Info, "correlation " + std::to_string(s.corr));
        }
      } else if (s.kind == "Event Sync") {
        if (s.record_corr >= 0 && record(s.record_corr, s.wait_stream)) {
          op.set_api_class(ApiClass::EventSync);
          info().event = static_cast<std::uint64_t>(s.record_corr);
          info().has_event = true;
        }
      } else if (s.kind == "Stream Sync") {
        op.set_api_class(ApiClass::StreamSync);
        if (s.stream >= 0 && s.stream != 4294967295LL) info().stream = stream_lane(dev, s.stream);
      } else if (s.kind == "Context Sync" || s.kind == "Device Sync") {
        op.set_api_class(ApiClass::DeviceSync);
        info().device = device_index(dev);
      }
    }
  }

  struct Sync {
    std::int64_t corr;
    std::string kind;
    std::int64_t device, stream, wait_stream, record_corr;
  };
  struct PairHash {
    std::size_t operator()(const std::pair<std::int64_t, std::int64_t>& p) const {
      return std::hash<std::int64_t>{}(p.first * 0x9E3779B97F4A7C15LL ^ p.second);
    }
  };

  std::string path_;
  ImportOptions opt_;
  Progress progress_;
  Trace t_;
  LaunchInterner launches_;
  Ev ev_;
  Device dev_;
  bool bare_ = false;         // the root is the events array itself
  std::uint64_t legacy_ = 0;  // legacy host ops read
  std::vector<Device> devices_;
  enum class TopKey : std::uint8_t { Other, Events, Devices, Dist };
  TopKey top_key_ = TopKey::Other;
  std::string error_;
  bool args_key_ = false;  // the event's key just read is "args"
  Field field_ = Field::None;
  Top top_ = Top::None;
  int depth_ = 0, list_pos_ = 0;
  bool in_event_ = false, in_args_ = false, in_device_ = false, list_field_ = false, saw_events_ = false;
  std::uint64_t events_ = 0;
  const char* sentinel_ = nullptr;  // where the events were in the document read in pieces
  bool sentinel_seen_ = false;      // the root's "traceEvents" array held it
  Round* sink_ = nullptr;           // a second thread's walk: its events kept there, not made into ops
  bool py_candidate_ = false;       // (that walk) the event is a Python frame passed over once one is noted
  bool skip_rest_ = false;          // the event being read is of a phase not read: skip its other members
  bool python_noted_ = false;       // a Python frame (with_stack) was noted, with its name as the example
  bool python_counted_ = false;     // the event being read is a later Python frame: counted, not read
  std::uint32_t rank_ = kNone, host_process_ = kNone, world_size_ = 0;
  std::unordered_map<std::int64_t, std::uint32_t> process_, device_;
  std::unordered_map<std::pair<std::int64_t, std::int64_t>, LaneId, PairHash> thread_lane_, stream_lane_;
  std::unordered_map<std::string, std::pair<StrId, ApiClass>> api_names_;
  std::unordered_map<std::int64_t, OpId> api_by_corr_;
  std::vector<std::pair<OpId, std::int64_t>> pending_;
  std::vector<Sync> syncs_;
  std::vector<std::pair<std::int64_t, std::string>> names_;
};

}  // namespace

int KinetoImporter::sniff(const SniffInput& in) const {
  std::string_view head = in.head;
  // Still compressed: a gzip file whose content could not be read; the importer says why.
  if (head.size() >= 2 && static_cast<unsigned char>(head[0]) == 0x1f && static_cast<unsigned char>(head[1]) == 0x8b) return 10;
  // A Chrome trace as a bare array of events (PyTorch 1.8-era exports, chrome://tracing's own).
  const std::size_t i = json_content_start(head);
  if (i != std::string_view::npos && head[i] == '[') {
    std::size_t j = head.find_first_not_of(" \t\r\n", i + 1);
    const bool events =
        j != std::string_view::npos && (head[j] == '{' || head[j] == ']') &&
        ((head.find("\"ph\"") != std::string_view::npos && head.find("\"ts\"") != std::string_view::npos) || head[j] == ']');
    return events ? 70 : 0;
  }
  if (!json_object_start(head)) return 0;
  if (in.keys) return in.has_key("traceEvents") ? 80 : 0;
  if (head.find("\"traceEvents\"") != std::string_view::npos || head.find("\"schemaVersion\"") != std::string_view::npos ||
      head.find("\"deviceProperties\"") != std::string_view::npos)
    return 80;
  return 0;
}

Trace KinetoImporter::import(const std::string& path, const ImportOptions& opt) const { return Reader(path, opt).run(); }

}  // namespace bneck
