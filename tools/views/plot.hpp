// The one plotting module of the SVG outputs (roofline --svg, validate-report --svg, sweep --svg):
// a chart with linear or logarithmic axes, a grid with tick labels, polylines, points with
// tooltips, reference lines and a legend, written as one standalone SVG.
#pragma once
#include <functional>
#include <iosfwd>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace bneck {

struct PlotAxis {
  double lo = 0, hi = 1;
  bool log = false;
  std::string label;
  std::function<std::string(double)> tick;            // tick label (default: the number)
  std::vector<std::pair<double, std::string>> ticks;  // explicit ticks (default: decades or 5 steps)
};

class SvgPlot {
 public:
  // Margins: left, right, top, bottom (pixels).
  SvgPlot(double width, double height, std::string title, PlotAxis x, PlotAxis y, double left = 80, double right = 30, double top = 40,
          double bottom = 70);
  double X(double v) const;  // data to pixels (clamped to the axis)
  double Y(double v) const;
  void grid();
  void polyline(const std::vector<std::pair<double, double>>& pts, const std::string& color, double width = 2);
  void point(double x, double y, double r, const std::string& color, const std::string& tooltip, bool filled = true, double opacity = 0.6);
  void text(double px, double py, const std::string& s, const char* anchor = "start", const std::string& color = "");
  // One line per entry at the plot's top right (or at `px`, `py`): a swatch and a label.
  void legend(const std::vector<std::pair<std::string, std::string>>& color_label, double px = -1, double py = -1);
  void write(std::ostream& out) const;

  static const char* color(std::size_t i);  // a 10-colour palette

 private:
  double frac(const PlotAxis& a, double v) const;
  double w_, h_, l_, r_, t_, b_;
  std::string title_;
  PlotAxis x_, y_;
  std::ostringstream body_;
};

std::string svg_escape(const std::string& s);

}  // namespace bneck
