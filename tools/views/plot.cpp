#include "tools/views/plot.hpp"

#include <algorithm>
#include <cmath>
#include <ostream>

namespace bneck {

std::string svg_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else if (c == '"')
      o += "&quot;";
    else
      o += c;
  }
  return o;
}

const char* SvgPlot::color(std::size_t i) {
  static const char* c[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return c[i % 10];
}

SvgPlot::SvgPlot(double width, double height, std::string title, PlotAxis x, PlotAxis y, double left, double right, double top,
                 double bottom)
    : w_(width), h_(height), l_(left), r_(right), t_(top), b_(bottom), title_(std::move(title)), x_(std::move(x)), y_(std::move(y)) {}

double SvgPlot::frac(const PlotAxis& a, double v) const {
  v = std::clamp(v, a.lo, a.hi);
  if (a.log) return (std::log10(v) - std::log10(a.lo)) / (std::log10(a.hi) - std::log10(a.lo));
  return a.hi > a.lo ? (v - a.lo) / (a.hi - a.lo) : 0;
}
double SvgPlot::X(double v) const { return l_ + frac(x_, v) * (w_ - l_ - r_); }
double SvgPlot::Y(double v) const { return h_ - b_ - frac(y_, v) * (h_ - t_ - b_); }

void SvgPlot::grid() {
  auto ticks = [](const PlotAxis& a) {
    std::vector<std::pair<double, std::string>> t = a.ticks;
    if (!t.empty()) return t;
    auto label = [&](double v) {
      if (a.tick) return a.tick(v);
      std::ostringstream o;
      o << v;
      return o.str();
    };
    if (a.log)
      for (double d = std::pow(10, std::ceil(std::log10(a.lo) - 1e-9)); d <= a.hi * 1.001; d *= 10) t.emplace_back(d, label(d));
    else
      for (int k = 0; k <= 5; ++k) t.emplace_back(a.lo + (a.hi - a.lo) * k / 5, label(a.lo + (a.hi - a.lo) * k / 5));
    return t;
  };
  for (const auto& [v, s] : ticks(x_))
    body_ << "<line x1=\"" << X(v) << "\" y1=\"" << t_ << "\" x2=\"" << X(v) << "\" y2=\"" << h_ - b_ << "\" stroke=\"#eee\"/><text x=\""
          << X(v) << "\" y=\"" << h_ - b_ + 18 << "\" text-anchor=\"middle\">" << svg_escape(s) << "</text>\n";
  for (const auto& [v, s] : ticks(y_))
    body_ << "<line x1=\"" << l_ << "\" y1=\"" << Y(v) << "\" x2=\"" << w_ - r_ << "\" y2=\"" << Y(v) << "\" stroke=\"#eee\"/><text x=\""
          << l_ - 6 << "\" y=\"" << Y(v) + 4 << "\" text-anchor=\"end\">" << svg_escape(s) << "</text>\n";
  if (!x_.label.empty())
    body_ << "<text x=\"" << (l_ + w_ - r_) / 2 << "\" y=\"" << h_ - 25 << "\" text-anchor=\"middle\">" << svg_escape(x_.label)
          << "</text>\n";
  if (!y_.label.empty())
    body_ << "<text transform=\"translate(16," << (t_ + h_ - b_) / 2 << ") rotate(-90)\" text-anchor=\"middle\">" << svg_escape(y_.label)
          << "</text>\n";
}

void SvgPlot::polyline(const std::vector<std::pair<double, double>>& pts, const std::string& color, double width) {
  body_ << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"" << width << "\" points=\"";
  for (const auto& [x, y] : pts) body_ << X(x) << "," << Y(y) << " ";
  body_ << "\"/>\n";
}

void SvgPlot::point(double x, double y, double r, const std::string& color, const std::string& tooltip, bool filled, double opacity) {
  body_ << "<circle cx=\"" << X(x) << "\" cy=\"" << Y(y) << "\" r=\"" << r << "\" "
        << (filled ? "fill=\"" + color + "\" fill-opacity=\"" + std::to_string(opacity) + "\"" : "fill=\"none\" stroke=\"" + color + "\"")
        << ">";
  if (!tooltip.empty()) body_ << "<title>" << svg_escape(tooltip) << "</title>";
  body_ << "</circle>\n";
}

void SvgPlot::text(double px, double py, const std::string& s, const char* anchor, const std::string& color) {
  body_ << "<text x=\"" << px << "\" y=\"" << py << "\" text-anchor=\"" << anchor << "\""
        << (color.empty() ? "" : " fill=\"" + color + "\"") << ">" << svg_escape(s) << "</text>\n";
}

void SvgPlot::legend(const std::vector<std::pair<std::string, std::string>>& items, double px, double py) {
  if (px < 0) px = w_ - r_ - 150;
  if (py < 0) py = t_ + 10;
  for (const auto& [c, label] : items) {
    body_ << "<circle cx=\"" << px << "\" cy=\"" << py << "\" r=\"5\" fill=\"" << c << "\"/><text x=\"" << px + 10 << "\" y=\"" << py + 4
          << "\">" << svg_escape(label) << "</text>\n";
    py += 16;
  }
}

void SvgPlot::write(std::ostream& out) const {
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w_ << "\" height=\"" << h_
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"" << l_ << "\" y=\"24\" font-size=\"15\">" << svg_escape(title_)
      << "</text>\n"
      << body_.str() << "</svg>\n";
}

}  // namespace bneck
