#!/usr/bin/env bash
# gui-review.sh: drives the real workbench under Xvfb with xdotool along a user's paths and asserts on what it
# finds, so a review can be repeated (and CI repeats it, .ci/run):
#   1. a new user: the Fashion-MNIST CNN template -> train a few seconds (Start Training, then Stop) -> Export
#      dialog (File > Export Model, the run's checkpoint preselected and named) -> export -> Predict dock (Load
#      run) -> File > Save As -> quit -> open the saved file again: its run's curves and weights are there
#      (issue 34: train first, save later);
#   2. open project B after training project A (File > Open Recent): the dashboard, Runs view, Export dialog
#      and Predict dock offer none of A's runs and say so, and export writes nothing; then B trained, export
#      writes B's weights;
#   3. closing the window mid-run asks; "Stop and keep weights" records the run as stopped with the epochs it
#      finished and its curves.
# The assertions read what the workbench writes: its state file (strata --state-file: the project, the run each
# view uses, errors, where its buttons are), the run history database (python3's sqlite3), the exported files
# and window titles. Clicks go where the state file says the button is, so a layout change does not make them
# miss. Each step leaves a screenshot in the output folder.
# HOME and the per-user data and settings go to a scratch folder (removed at the end), so the run folders,
# history, settings and exports of the person running it are not touched.
# Needs Xvfb, xdotool, ImageMagick's import and python3: tools/install-deps.sh gui-review.
# Usage: tools/gui-review.sh [--build DIR] [--out DIR]   (defaults: build, gui-review); exit 1 if a check fails.
set -euo pipefail

build=build
out=gui-review
while (($#)); do
  case "$1" in
    --build) build=${2:?--build needs a folder}; shift 2 ;;
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    *) echo "usage: tools/gui-review.sh [--build DIR] [--out DIR]" >&2; exit 2 ;;
  esac
done
for tool in Xvfb xdotool import python3; do
  command -v "$tool" >/dev/null || { echo "gui-review: $tool is missing (tools/install-deps.sh gui-review)" >&2; exit 2; }
done
[[ -x "$build/bin/strata" ]] || { echo "gui-review: no $build/bin/strata (build it first)" >&2; exit 2; }
fashion=/usr/share/datasets/fashion-mnist
[[ -f $fashion/train-images-idx3-ubyte.gz ]] || { echo "gui-review: no Fashion-MNIST in $fashion" >&2; exit 2; }
strata=$(cd "$build/bin" && pwd)/strata
examples=$(cd "$(dirname "$0")/../examples" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)

scratch=$(mktemp -d)
# -displayfd: Xvfb picks a free display and says which.
Xvfb -displayfd 3 -screen 0 1600x1000x24 -nolisten tcp 3>"$scratch/display" >"$scratch/xvfb.log" 2>&1 &
xvfb_pid=$!
app_pid=""
cleanup() {
  if [[ -n "$app_pid" ]]; then kill "$app_pid" 2>/dev/null || true; fi
  kill "$xvfb_pid" 2>/dev/null || true
  rm -rf "$scratch"
}
trap cleanup EXIT
for _ in $(seq 100); do [[ -s "$scratch/display" ]] && break; sleep 0.1; done
DISPLAY=":$(head -1 "$scratch/display")"
export DISPLAY
export HOME="$scratch/home" XDG_DATA_HOME="$scratch/data" XDG_CONFIG_HOME="$scratch/config"
mkdir -p "$HOME" "$scratch/a" "$scratch/b" "$scratch/c" "$scratch/saved"
state="$scratch/state.json"
export GUI_REVIEW_STATE=$state GUI_REVIEW_DB="$XDG_DATA_HOME/Strata/Strata/runs.sqlite"

# Projects on Fashion-MNIST: A the MLP, B the CNN, a few thousand samples each (an MLP epoch takes tens of
# milliseconds, a CNN's about a second); C the MLP with epochs enough to be still running when the window closes
# (A's 60 epochs can end in two seconds, before the close prompt is answered).
python3 - "$examples" "$scratch" <<'EOF'
import json, sys
examples, scratch = sys.argv[1], sys.argv[2]
for src, dst, epochs in (("fashion_mlp.strata", "a/mlp.strata", 60), ("fashion_cnn.strata", "b/cnn.strata", 60),
                         ("fashion_mlp.strata", "c/long.strata", 100000)):
    p = json.load(open(f"{examples}/{src}"))
    p["dataset"]["train_limit"] = 3000
    p["dataset"]["validation_limit"] = 500
    p["training"]["epochs"] = epochs
    json.dump(p, open(f"{scratch}/{dst}", "w"), indent=2)
EOF
project_a="$scratch/a/mlp.strata" project_b="$scratch/b/cnn.strata" project_c="$scratch/c/long.strata"
saved="$scratch/saved/tt.strata"

# q.py: evaluates a Python expression over the state file (s), the run history (sql(...)) and files.
cat >"$scratch/q.py" <<'EOF'
import json, os, sqlite3, sys, time
def load():
    try:
        with open(os.environ["GUI_REVIEW_STATE"]) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}
def sql(query, *args):
    if not os.path.exists(os.environ["GUI_REVIEW_DB"]):
        return []
    db = sqlite3.connect(os.environ["GUI_REVIEW_DB"], timeout=10)
    try:
        return db.execute(query, args).fetchall()
    finally:
        db.close()
def one(query, *args):
    rows = sql(query, *args)
    return rows[0][0] if rows else None
def exists(path):
    return bool(path) and os.path.exists(path)
def holds(path, text):
    return exists(path) and text.encode() in open(path, "rb").read()
mode, expr = sys.argv[1], sys.argv[2]
env = {"sql": sql, "one": one, "exists": exists, "holds": holds, "os": os, "json": json}
if mode == "wait":
    deadline = time.time() + float(sys.argv[3])
    while True:
        env["s"] = load()
        try:
            if eval(expr, env):
                sys.exit(0)
        except Exception:
            pass
        if time.time() > deadline:
            sys.exit(1)
        time.sleep(0.2)
env["s"] = load()
try:
    value = eval(expr, env)
except Exception as e:
    value = f"{type(e).__name__}: {e}"
print(value if mode == "get" else ("1" if value is True else repr(value)))
EOF
q() { python3 "$scratch/q.py" get "$1"; }

failures=0 checks=0
# check "what the user should see" PYTHON-EXPRESSION: passes when it is True.
check() {
  checks=$((checks + 1))
  local got
  got=$(python3 "$scratch/q.py" check "$2")
  if [[ "$got" == "1" ]]; then
    echo "gui-review: ok    $1"
  else
    failures=$((failures + 1))
    echo "gui-review: FAIL  $1 ($2 gave ${got:0:300})" >&2
  fi
}
# wait_for PYTHON-EXPRESSION SECONDS: false (and says so) when it never holds.
wait_for() {
  python3 "$scratch/q.py" wait "$1" "$2" && return 0
  echo "gui-review: waited ${2}s for: $1" >&2
  return 1
}
shot() {
  import -window root "$out/$1.png"
  echo "gui-review: $out/$1.png"
}
# Clicks a menu, then its entries, each by the start of its text ("File" "Open Recent" "2 "), as a user does.
# The script clicks rather than types shortcuts: without a window manager, a synthetic key can reach Qt late
# (a Ctrl+E opened the Export dialog again when the main window was next clicked).
menu() {
  click "menu:$1"
  shift
  for entry in "$@"; do
    wait_for "any(k.startswith('item:$entry') for k in s['clicks'])" 10 || true
    click_at "next((v for k, v in s['clicks'].items() if k.startswith('item:$entry')), None)"
  done
  sleep 0.5
}
# Clicks the control the state file places at clicks[NAME] (or at the Python expression's point).
click_at() {
  local point
  point=$(q "$1")
  if [[ ! "$point" =~ ^\[([0-9-]+),\ ([0-9-]+)\]$ ]]; then
    echo "gui-review: nothing to click at $1 ($point)" >&2
    return 1
  fi
  xdotool mousemove "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" click 1
}
click() { click_at "s['clicks'].get('$1')"; }
launch() {
  rm -f "$state"
  "$strata" "$@" --state-file "$state" >>"$scratch/strata.log" 2>&1 &
  app_pid=$!
  window=""
  for _ in $(seq 240); do
    window=$(xdotool search --onlyvisible --name ' - Strata$' 2>/dev/null | head -1 || true)
    [[ -n "$window" ]] && break
    sleep 0.25
  done
  if [[ -z "$window" ]]; then
    shot launch-failed
    echo "gui-review: no workbench window after 60 s (strata $*); its output:" >&2
    cat "$scratch/strata.log" >&2
    exit 1
  fi
  xdotool windowsize "$window" 1600 1000  # no window manager: the window sits at (0, 0)
  xdotool windowfocus --sync "$window" 2>/dev/null || true
  wait_for "s.get('project') is not None" 30
  sleep 1
}
# The Export dialog, opened from the File menu.
open_export() {
  menu File "Export Model"
  wait_for "s.get('export', {}).get('visible')" 20 || true
  sleep 1
}
close_export() {
  click exportClose
  wait_for "not s['export']['visible']" 10 || true
}
quit_app() {
  menu File Quit
  for _ in $(seq 120); do kill -0 "$app_pid" 2>/dev/null || break; sleep 0.25; done
  if kill -0 "$app_pid" 2>/dev/null; then
    echo "gui-review: the workbench did not quit" >&2
    failures=$((failures + 1))
    kill "$app_pid"
  fi
  wait "$app_pid" 2>/dev/null || true
  app_pid=""
}
# Trains the open project for about `seconds`, then stops (the run keeps the weights it had).
train_briefly() {
  click "tool:Start Training"
  wait_for "s['dashboard']['trainLossPoints'] > 20" 120 || true
  sleep "$1"
  click "tool:Stop"
  wait_for "s['dashboard']['state'] == 'idle'" 120 || true
}

# ---- 1. A new user: template, train, export, predict, then save, quit and reopen ---------------------------
launch
shot 01-template
click "tool:Start Training"
wait_for "s['dashboard']['trainLossPoints'] > 50" 120 || true
shot 02-training
click "tool:Stop"
wait_for "s['dashboard']['state'] == 'idle'" 120 || true
shot 03-stopped
run1=$(q "s['dashboard']['run']")
check "the unsaved project's run is recorded with the project's id" \
  "one('SELECT project_id FROM runs WHERE id = ?', $run1) == s['project']['id'] != ''"
check "the run kept its weights" "s['runs'][0]['id'] == $run1 and exists(s['runs'][0]['checkpoint'])"

open_export
shot 04-export-dialog
check "the export dialog names the run it exports" "s['export']['sourceRun'].startswith('run $run1,')"
check "its source is that run's checkpoint" "s['export']['source'] == s['runs'][0]['checkpoint']"
click exportButton
wait_for "'Wrote' in s['export']['result'] or s['export']['error']" 120 || true
shot 05-exported
check "export wrote the file and checked it" "'Wrote' in s['export']['result'] and exists(s['export']['output'])"
close_export
click "tab:Predict"
sleep 1
click predictLoadRun
wait_for "s['predict']['hasModel'] or s['predict']['error']" 120 || true
sleep 1
shot 06-predict
check "Predict loaded the run's weights and names the run" "s['predict']['modelRun'].startswith('run $run1,')"

menu File "Save As"
sleep 1.5
xdotool type --delay 15 "$saved"
xdotool key Return
wait_for "s['project']['path'] == '$saved'" 20 || true
check "Save As: the window is titled after the file" "'tt.strata' in os.popen('xdotool getwindowname $window').read()"
check "the run made before the first save is adopted by the file" \
  "one('SELECT project_path FROM runs WHERE id = ?', $run1) == '$saved'"
quit_app
launch "$saved"
wait_for "s['dashboard']['trainLossPoints'] > 0" 30 || true
shot 07-reopened
check "reopened: the dashboard shows the run's curves" \
  "s['dashboard']['run'] == $run1 and s['dashboard']['trainLossPoints'] > 50"
check "reopened: Predict offers the run's weights" "s['predict']['picked']['id'] == $run1"
check "reopened: the file holds the id its runs recorded" \
  "json.load(open('$saved'))['id'] == s['project']['id']"
quit_app

# ---- 2. Open project B after training project A: none of A's runs anywhere ---------------------------------
launch "$project_b"  # B goes on the recent list
quit_app
launch "$project_a"
train_briefly 2
runa=$(q "s['dashboard']['run']")
check "A's run kept weights" "s['runs'][0]['id'] == $runa and exists(s['runs'][0]['checkpoint'])"
menu File "Open Recent" "2 "  # the second entry: B
wait_for "s['project']['path'] == '$project_b'" 30 || true
sleep 1
shot 08-opened-b
check "B is open" "s['project']['path'] == '$project_b'"
check "B's dashboard has none of A's curves" "s['dashboard']['trainLossPoints'] == 0 and s['dashboard']['run'] == 0"
check "B has no runs; the Runs view lists none" "s['runs'] == [] and s['runsView']['rows'] == 0"
open_export
shot 09-export-b
check "the export dialog offers no source for B" "s['export']['source'] == '' and s['export']['sourceRun'] == ''"
check "and says why" "'No run of this project has kept weights' in s['export']['note']"
check "its output is named after B" "os.path.basename(s['export']['output']).startswith('fashion-mnist-cnn')"
output_b=$(q "s['export']['output']")
click exportButton
wait_for "s['export']['error']" 30 || true
check "export refuses, and writes nothing" "s['export']['error'] != '' and not exists('$output_b')"
close_export
click "tab:Predict"
sleep 1
click predictLoadRun
wait_for "s['predict']['error']" 30 || true
shot 10-predict-b
check "Predict loads nothing of A into B, and says why" \
  "not s['predict']['hasModel'] and 'No run of this project has kept weights' in s['predict']['error']"
check "Optimize has no run of B to start from" "s['optimize']['picked'] is None"

train_briefly 2
runb=$(q "s['dashboard']['run']")
open_export
check "once B is trained, export offers B's run" "s['export']['sourceRun'].startswith('run $runb,')"
click exportButton
wait_for "'Wrote' in s['export']['result'] or s['export']['error']" 120 || true
shot 11-export-b-trained
check "the file holds B's weights (conv1), under B's name" \
  "'Wrote' in s['export']['result'] and holds('$output_b', 'conv1.weight')"
close_export
quit_app

# ---- 3. Closing the window mid-run asks, and the run is recorded as stopped --------------------------------
launch "$project_c"
click "tool:Start Training"
wait_for "s['dashboard']['run'] > 0" 60 || true
run3=$(q "s['dashboard']['run']")
wait_for "one(\"SELECT COUNT(*) FROM metrics WHERE run_id = ? AND kind = 'epoch'\", $run3) >= 2" 120 || true
menu File Quit
wait_for "s.get('messageBox', {}).get('name') == 'activeRunPrompt'" 20 || true
shot 12-close-prompt
check "closing during a run asks" "s['messageBox']['title'] == 'Training is running'"
click_at "s['messageBox']['buttons'].get('Stop and keep weights')"
for _ in $(seq 240); do kill -0 "$app_pid" 2>/dev/null || break; sleep 0.25; done
check "the workbench closed once the run had stopped" "not os.path.exists('/proc/$app_pid')"
wait "$app_pid" 2>/dev/null || true
app_pid=""
check "the run is recorded as stopped" "one('SELECT status FROM runs WHERE id = ?', $run3) == 'stopped'"
check "with the epochs it finished (2 or more), as many as its curve has" \
  "one('SELECT epochs_completed FROM runs WHERE id = ?', $run3) >= 2 and one('SELECT epochs_completed FROM runs WHERE id = ?', $run3) == one(\"SELECT COUNT(*) FROM metrics WHERE run_id = ? AND kind = 'epoch'\", $run3)"
check "and its step curve" "one(\"SELECT COUNT(*) FROM metrics WHERE run_id = ? AND kind = 'step'\", $run3) > 0"
check "and the weights it had" \
  "exists(os.path.join(one('SELECT run_folder FROM runs WHERE id = ?', $run3), 'latest.safetensors'))"

if ((failures > 0)); then
  echo "gui-review: $failures of $checks checks failed; the screenshots are in $out/; the workbench's output:" >&2
  cat "$scratch/strata.log" >&2
  exit 1
fi
echo "gui-review: all $checks checks passed; the screenshots are in $out/"
