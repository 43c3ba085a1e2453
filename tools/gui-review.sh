#!/usr/bin/env bash
# gui-review.sh: drives the real workbench under Xvfb with xdotool along a new user's path, so a review can
# be repeated: the Fashion-MNIST CNN template it opens with -> train a few seconds (F5, then Stop) ->
# Export dialog (Ctrl+E, the latest run's checkpoint preselected, Return exports) -> Predict dock (its tab,
# then "Load project checkpoint") -> saved screenshots of each step.
# HOME and the per-user data and settings go to a scratch folder (removed at the end), so the run folder,
# history, dock layout and exported file of the person running it are not touched. Clicks use positions in a 1600x1000 screen (the Predict tab and
# its button); if the layout changes, the screenshots show where a click missed.
# Needs Xvfb, xdotool and ImageMagick's import: tools/install-deps.sh gui-review.
# Usage: tools/gui-review.sh [--build DIR] [--out DIR]   (defaults: build, gui-review)
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
for tool in Xvfb xdotool import; do
  command -v "$tool" >/dev/null || { echo "gui-review: $tool is missing (tools/install-deps.sh gui-review)" >&2; exit 2; }
done
[[ -x "$build/bin/strata" ]] || { echo "gui-review: no $build/bin/strata (build it first)" >&2; exit 2; }
mkdir -p "$out"

scratch=$(mktemp -d)
display=":$((90 + RANDOM % 9))"
Xvfb "$display" -screen 0 1600x1000x24 -nolisten tcp >"$scratch/xvfb.log" 2>&1 &
xvfb_pid=$!
app_pid=""
cleanup() {
  if [[ -n "$app_pid" ]]; then kill "$app_pid" 2>/dev/null || true; fi
  kill "$xvfb_pid" 2>/dev/null || true
  rm -rf "$scratch"
}
trap cleanup EXIT
export DISPLAY=$display
for _ in $(seq 50); do xdotool getdisplaygeometry >/dev/null 2>&1 && break; sleep 0.1; done

shot() {
  import -window root "$out/$1.png"
  echo "gui-review: $out/$1.png"
}

mkdir -p "$scratch/home"
HOME="$scratch/home" XDG_DATA_HOME="$scratch/data" XDG_CONFIG_HOME="$scratch/config" "$build/bin/strata" >"$scratch/strata.log" 2>&1 &
app_pid=$!
window=$(xdotool search --sync --onlyvisible --name 'Strata' | head -1)
xdotool windowsize "$window" 1600 1000   # no window manager: the window sits at (0, 0)
xdotool windowfocus --sync "$window" 2>/dev/null || true
sleep 2
shot 01-template

xdotool key --window "$window" F5      # Start Training
sleep 8
shot 02-training
xdotool key --window "$window" shift+F5  # Stop: the run keeps its weights in its run folder
sleep 3
shot 03-stopped

xdotool key --window "$window" ctrl+e  # File > Export Model
dialog=$(xdotool search --sync --onlyvisible --name 'Export' | head -1)
sleep 2
shot 04-export-dialog
# Keys sent to a window without the focus are ignored, and Xvfb has no window manager to give it: click.
xdotool mousemove --window "$dialog" 67 205 click 1   # Export and check (the run's checkpoint is preselected)
sleep 10
shot 05-exported
xdotool mousemove --window "$dialog" 668 205 click 1  # Close
sleep 1
# A missed click leaves the dialog over the Predict dock; take it off the screen then (and say so).
if xdotool search --onlyvisible --name 'Export model' >/dev/null 2>&1; then
  echo "gui-review: the Close click missed; unmapping the export dialog" >&2
  xdotool windowunmap "$dialog"
fi

xdotool mousemove 171 963 click 1      # the Predict dock's tab (1600x1000 layout)
sleep 1
xdotool mousemove 1393 616 click 1     # "Load project checkpoint"
sleep 5
shot 06-predict

if ! kill -0 "$app_pid" 2>/dev/null; then
  echo "gui-review: the workbench exited early; its output:" >&2
  cat "$scratch/strata.log" >&2
  exit 1
fi
echo "gui-review: done; look at the screenshots in $out/"
