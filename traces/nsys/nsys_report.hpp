// Nsight Systems reports (.nsys-rep; .qdrep before 2021.3): a format only Nsight Systems itself
// reads. bneck reads a report through its SQLite export, made by the `nsys` it finds (BNECK_NSYS,
// else PATH) into a private temporary folder that is removed afterwards; the report is only read.
// Without an nsys, the error line gives the command that exports it.
#pragma once
#include <functional>
#include <string>
#include <string_view>

#include "traces/ir.hpp"

namespace bneck {

// The file starts with an Nsight Systems report's header ("NVIDIA Tegra Profiler Report").
bool is_nsys_report(std::string_view head);
// The file is named as a report (.nsys-rep, .qdrep): for content no importer claims (an older
// report's header).
bool named_nsys_report(const std::string& path);

// The nsys executable: BNECK_NSYS if set (empty if that is not an executable file), else the first
// `nsys` on PATH; empty if none.
std::string find_nsys();

// Exports the report with `nsys export --type sqlite` and imports the export with
// `import_export`; InputError naming the report when there is no nsys, the export fails, or the
// export is bad (its messages name the report, not the temporary file).
Trace import_nsys_report(const std::string& path, const std::function<Trace(const std::string&)>& import_export);

}  // namespace bneck
