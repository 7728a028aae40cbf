"""ctest python_train_torch*: examples/python/train_torch.py against sparsepush-train and itself.

    check_train_torch.py TRAIN_TORCH SPARSEPUSH_TRAIN WORKDIR [MPIEXEC FLAG... -- NP]

Runs one short SCSP run (4 nodes) three ways: train_torch.py over the loopback, sparsepush-train
(the reference backend) and, when an mpiexec command is given, train_torch.py over MPI with NP
ranks. The MPI run must give every accuracy, loss, divergence and byte count of the loopback run
exactly (the same nodes, bits and messages); the reference's averaged-model accuracy must be
within 1.5 points of torch's, with the same messages and final-round count.
"""
import json
import os
import subprocess
import sys

torch_script, reference, work = sys.argv[1:4]
mpi = sys.argv[4:]
common = ["--nodes", "4", "--epochs", "0.05", "--eval-samples", "500", "--final-eval-samples", "2000", "--seed", "3"]
os.makedirs(work, exist_ok=True)


def run(cmd, name):
    out = os.path.join(work, name + ".json")
    if os.path.exists(out):
        os.remove(out)
    print("+", " ".join(cmd + ["--summary", out]), flush=True)
    subprocess.run(cmd + ["--summary", out], check=True)
    with open(out) as f:
        return json.load(f)


loop = run([sys.executable, torch_script] + common, "loopback")
ref = run([reference, "--threads", "1"] + common, "reference")
failures = []
acc = "averaged_model_test_accuracy"
gap = abs(loop[acc] - ref[acc])
print(f"averaged-model accuracy: train_torch.py {loop[acc]:.4f}, sparsepush-train {ref[acc]:.4f} (gap {gap * 100:.2f} points)")
if not gap <= 0.015:
    failures.append(f"accuracy gap {gap * 100:.2f} points > 1.5")
for key in ("messages_sent", "final_rounds", "rounds"):
    if loop.get(key) != ref.get(key):
        failures.append(f"{key}: train_torch.py {loop.get(key)}, sparsepush-train {ref.get(key)}")
if mpi:
    sep = mpi.index("--")
    launcher, np_ = mpi[:sep], mpi[sep + 1]
    over = run(launcher + [np_, sys.executable, torch_script, "--transport", "mpi"] + common, "mpi")
    same = ["averaged_model_test_accuracy", "avg_test_accuracy", "min_node_test_accuracy", "max_node_test_accuracy",
            "param_divergence", "loss", "first_loss", "bytes_sent_total", "bytes_final_phase", "messages_sent",
            "weight_mass", "final_rounds", "rounds"]
    differ = [key for key in same if over.get(key) != loop.get(key)]
    failures += [f"{key}: MPI {over.get(key)!r}, loopback {loop.get(key)!r}" for key in differ]
    print(f"MPI ({np_} ranks) against the loopback: {len(same) - len(differ)} of {len(same)} keys equal")
if failures:
    sys.exit("check_train_torch: " + "; ".join(failures))
print("check_train_torch: ok")
