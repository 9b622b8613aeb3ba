"""The attention benchmark (scripts/bench/attention.py) on a short simulated day: the real
server in process with its clock injected, a paired program sending signals, the person
chatting. Its goals hold: every salient signal is thought about and told, no call is made for
faint signals, and no thought fires or arrives during a conversation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "scripts" / "bench" / "attention.py"


def test_a_simulated_day_meets_the_attention_goals() -> None:
    """20 signals (about a third salient, some in a burst) and two conversations over 14
    simulated hours: the figures the benchmark reports meet its goals."""
    done = subprocess.run(
        [sys.executable, str(BENCH), "--seed", "3", "--signals", "20", "--bursts", "1",
         "--conversations", "2"], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    salient = figures["signals"]["salient"]
    assert salient > 0
    assert figures["salient_never_thought_about"] == 0
    assert figures["calls_for_faint_signals"] == 0
    assert figures["thoughts_during_conversation"] == 0
    assert figures["notifications_during_conversation"] == 0
    assert figures["signals"]["unattended_metric"] == figures["signals"]["sent"] - salient
    assert figures["dmn_calls_by_trigger"].get("signal", 0) >= 1
    assert figures["signal_to_notification_s"]["n"] >= 1
    assert figures["signal_to_notification_s"]["p50"] >= 20.0  # dmn.signal_debounce_s
