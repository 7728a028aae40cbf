"""ctest python_example_gossip_fashion_mnist: examples/python/gossip_fashion_mnist.py (a torch CNN
with sparsepush.torch.GossipOptimizer, nodes as threads) against sparsepush-train with the same
settings: the node-average test accuracy within 1.5 points, the same messages (bytes within 1%)
and the same final-round count.

    check_gossip_example.py EXAMPLE SPARSEPUSH_TRAIN WORKDIR
"""
import json
import os
import subprocess
import sys

example, reference, work = sys.argv[1:4]
common = ["--nodes", "4", "--epochs", "0.3", "--seed", "3"]
os.makedirs(work, exist_ok=True)


def run(cmd, name):
    out = os.path.join(work, name + ".json")
    print("+", " ".join(cmd + ["--summary", out]), flush=True)
    subprocess.run(cmd + ["--summary", out], check=True)
    with open(out) as f:
        return json.load(f)


torch_run = run([sys.executable, example] + common, "example")
ref = run([reference, "--threads", "1", "--eval-every", "1000"] + common, "reference")
failures = []
gap = abs(torch_run["avg_test_accuracy"] - ref["avg_test_accuracy"])
print(f"node-average test accuracy: the example {100 * torch_run['avg_test_accuracy']:.2f}%, sparsepush-train "
      f"{100 * ref['avg_test_accuracy']:.2f}% (gap {100 * gap:.2f} points)")
if not gap <= 0.015:
    failures.append(f"accuracy gap {100 * gap:.2f} points > 1.5")
# the same messages; their bytes differ a little, as top-K's index encoding follows which indices win
messages = sum(node["messages_sent"] for node in torch_run["nodes"])
if messages != ref["messages_sent"]:
    failures.append(f"messages sent: the example {messages}, sparsepush-train {ref['messages_sent']}")
sent = sum(node["bytes_sent"] for node in torch_run["nodes"])
if abs(sent - ref["bytes_sent_total"]) > 0.01 * ref["bytes_sent_total"]:
    failures.append(f"bytes sent: the example {sent}, sparsepush-train {ref['bytes_sent_total']} (more than 1% apart)")
if torch_run["nodes"][0]["final_rounds"] != ref["final_rounds"]:
    failures.append(f"final rounds: the example {torch_run['nodes'][0]['final_rounds']}, sparsepush-train "
                    f"{ref['final_rounds']}")
if failures:
    sys.exit("check_gossip_example: " + "; ".join(failures))
