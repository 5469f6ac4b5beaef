import time

STARTED = time.time()  # the first thing the user process does: note the moment it started

import json  # noqa: E402
import os  # noqa: E402

path = json.loads(os.environ["DET_HPARAMS"])["stamp_file"]
with open(path + ".tmp", "w") as f:
    f.write(repr(STARTED))
os.replace(path + ".tmp", path)  # the benchmark never sees a half-written stamp
