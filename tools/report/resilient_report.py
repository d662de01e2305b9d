#!/usr/bin/env python3
"""resilient-report: a job's records as a Chrome trace, PyTorch flight-recorder
dumps, an HTML page and Prometheus metrics (docs/observability.md).

The code is the package resilient_report (resilient_report/__init__.py says what
each module holds): beside this script in the source tree, in
<prefix>/share/nccl-resilient once installed (tools/report/meson.build). Python
standard library only.
"""

import os
import sys

HERE = os.path.dirname(os.path.realpath(__file__))

for folder in (HERE, os.path.join(os.path.dirname(HERE), "share", "nccl-resilient")):
    if os.path.isfile(os.path.join(folder, "resilient_report", "__init__.py")):
        sys.path.insert(0, folder)
        break

from resilient_report.cli import main  # noqa: E402 (found through the path above)

if __name__ == "__main__":
    sys.exit(main(here=HERE))
