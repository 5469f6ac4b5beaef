"""Lets torchvision import where its C++ ops cannot load: run with the python of the venv to mend.

The only torchvision 0.28.0 wheel this machine's package mirror has is PyPI's, built against the CUDA
build of torch 2.13.0: its `_C.so` needs libtorch_cuda.so and libcudart.so.13, which the CPU build of
torch (the one pedl pins) does not have. torchvision then loads without its C++ ops (nms, roi_align, ...;
they raise when called, as torchvision intends), except that two fake-tensor registrations in
`_meta_registrations.py` are not guarded by its own `_has_ops()` check, so `import torchvision` fails.
This guards them, as the other registrations of that file are. Its datasets and transforms (all that
Determined's mnist_pytorch fixture uses) are pure Python. Idempotent; exits 1 if torchvision still fails.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

GUARDED = "(lambda fn: fn) if not torchvision.extension._has_ops() else "
UNGUARDED = re.compile(r'^@torch\.library\.register_fake\(("torchvision::\w+")\)$', re.M)


def main() -> int:
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        print("torchvision is not installed here", file=sys.stderr)
        return 1
    path = Path(spec.origin).parent / "_meta_registrations.py"
    text = path.read_text()
    mended = UNGUARDED.sub(lambda m: f"@({GUARDED}torch.library.register_fake({m.group(1)}))", text)
    if mended != text:
        path.write_text(mended)
    check = subprocess.run(
        [sys.executable, "-c", "import torchvision.datasets, torchvision.transforms"], capture_output=True, text=True
    )
    if check.returncode != 0:
        print(f"torchvision still fails to import:\n{check.stderr}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
