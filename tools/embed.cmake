# Writes a header holding the report's script and style as C++ raw strings (configure-free: run
# at build time whenever they change).
file(READ "${JS}" js)
file(READ "${CSS}" css)
file(WRITE "${OUT}.tmp" "#pragma once\n// Generated from tools/views/report.js and report.css by tools/embed.cmake.\nnamespace bneck {\ninline constexpr const char* kReportJs = R\"BNECKJS(${js})BNECKJS\";\ninline constexpr const char* kReportCss = R\"BNECKCSS(${css})BNECKCSS\";\n}  // namespace bneck\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
