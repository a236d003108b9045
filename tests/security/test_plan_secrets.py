"""Issue 30 item 7: a launch plan shown to a person masks secrets by the shape of their name or
flag; the argv sent to docker keeps the real values."""

import dataclasses

from sparktui.actions.cluster_plan import NodePlan

SECRETS = {"WANDB_API_KEY": "wandbvalue1", "AWS_SECRET_ACCESS_KEY": "awsvalue2", "MY_TOKEN": "tokvalue3",
           "DB_PASSWORD": "pwvalue4"}


def test_masked_argv_hides_secrets_real_argv_keeps_them():
    np = object.__new__(NodePlan)
    for f in dataclasses.fields(NodePlan):
        object.__setattr__(np, f.name, f.default if f.default is not dataclasses.MISSING else
                           (f.default_factory() if f.default_factory is not dataclasses.MISSING else ""))
    object.__setattr__(np, "env", {**SECRETS, "PLAIN": "visible"})
    object.__setattr__(np, "command", ("vllm", "serve", "m", "--api-key", "apikeyvalue5", "--hf-token=hfvalue6"))
    object.__setattr__(np, "labels", {})
    object.__setattr__(np, "volumes", {})
    shown = " ".join(np.docker_run_argv(masked=True))
    for v in (*SECRETS.values(), "apikeyvalue5", "hfvalue6"):
        assert v not in shown
    assert "PLAIN=visible" in shown
    real = " ".join(np.docker_run_argv())
    for v in (*SECRETS.values(), "apikeyvalue5", "hfvalue6"):
        assert v in real
