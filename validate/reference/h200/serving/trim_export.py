#!/usr/bin/env python3
# Trims an Nsight Systems sqlite export of a serving capture to what a calibration reads: the CUDA
# runtime calls that launched work (kernels, copies, memsets), with every other table kept; then
# VACUUM. Used by run_serving.sh, plain/run_serving_plain.sh, prefix/run_prefix.sh and
# static/run_static.sh.
# Usage: python3 validate/reference/h200/serving/trim_export.py EXPORT.sqlite
import sqlite3
import sys

c = sqlite3.connect(sys.argv[1])
c.execute("DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId NOT IN (SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL UNION SELECT correlationId FROM CUPTI_ACTIVITY_KIND_MEMCPY UNION SELECT correlationId FROM CUPTI_ACTIVITY_KIND_MEMSET)")
c.commit()
c.execute("VACUUM")
c.close()
