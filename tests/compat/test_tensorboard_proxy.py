"""A real TensorBoard, started with the arguments Determined 0.38.1's launcher gives it
(determined.exec.tensorboard: --path_prefix=/proxy/{task_id}), served through pedl's proxy: the page
and its data API answer at /proxy/{task_id}/ with the whole path passed on."""

from __future__ import annotations

import json
import os
import subprocess
import time

from tests.compat.conftest import det_venv
from tests.master.api.test_proxy import _register, proxy_overrides, world  # noqa: F401 - fixtures

ARGS = (
    "import json, sys, tensorboard; from determined.exec.tensorboard import get_tensorboard_args; "
    "print(json.dumps(get_tensorboard_args(tensorboard.__version__, sys.argv[1], [])))"
)


def test_determineds_tensorboard_through_the_proxy(world, tmp_path) -> None:  # noqa: F811
    sock, port = world.service.listen("127.0.0.1")
    sock.close()  # a free port for TensorBoard
    bin_dir = det_venv() / "bin"
    env = {
        **os.environ,
        "DET_TASK_ID": world.task.task_id,
        "TENSORBOARD_PORT": str(port),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    argv = json.loads(subprocess.check_output([str(bin_dir / "python"), "-c", ARGS, str(tmp_path)], env=env))
    assert f"--path_prefix=/proxy/{world.task.task_id}" in argv
    tb = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def alive() -> None:  # the fake agent sends no heartbeats: on a loaded machine it would be taken for lost
        world.agent.conn.last_heartbeat = world.agent.ctx.clock.now()

    try:
        alive()
        assert _register(world, port).status_code == 200
        for _ in range(600):  # TensorBoard takes a few seconds to listen; until then the proxy says 502
            alive()
            r = world.client.get(world.url, headers=world.alice)
            if r.status_code != 502:
                break
            time.sleep(0.1)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html"), r.text[:300]
        r = world.client.get(world.url + "data/environment", headers=world.alice)
        assert r.status_code == 200 and r.json()["data_location"] == str(tmp_path)
        assert world.client.get(world.url, headers=world.bob).status_code == 404
    finally:
        tb.kill()
        tb.wait()
