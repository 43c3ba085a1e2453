#!/usr/bin/env bash
# A project in a folder the user cannot write (an installed example under /usr/share/strata/examples) trains and
# exports as it is, as an ordinary user: its run goes to the per-user data folder
# ($XDG_DATA_HOME/Strata/Strata/runs/<project>/), strata-train says so, and export finds the checkpoint there.
# A relative checkpoint_dir in such a project is refused before training, naming the folder and --checkpoint-dir,
# and --checkpoint-dir then trains it. Root may write anywhere, so as root the commands run as nobody (setpriv).
# Usage: readonly_project.sh STRATA_TRAIN PROJECT_FILE (a project without checkpoint_dir, with "epochs")
set -euo pipefail

train=$1
project=$2
as_user=()
if [[ $(id -u) -eq 0 ]]; then
  if ! command -v setpriv >/dev/null || ! id nobody >/dev/null 2>&1; then
    echo "SKIP: running as root without setpriv or the user nobody, and root may write into any folder"
    exit 77
  fi
  as_user=(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups --)
fi
work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
chmod 755 "$work"
home="$work/home"
mkdir "$work/ro" "$work/ro2" "$home"
[[ ${#as_user[@]} -gt 0 ]] && chown nobody "$home"
cp "$project" "$work/ro/p.strata"
sed 's/"epochs": \([0-9]*\),/"epochs": \1, "checkpoint_dir": "ck",/' "$project" >"$work/ro2/p.strata"
grep -q '"checkpoint_dir": "ck"' "$work/ro2/p.strata" || {
  echo "FAIL: could not set checkpoint_dir in $project"
  exit 1
}
chmod 555 "$work/ro" "$work/ro2"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# The user's own environment: HOME, no XDG_DATA_HOME (its default, ~/.local/share).
as() { env -i PATH="$PATH" HOME="$home" "${as_user[@]}" "$@"; }

as test -w "$work/ro" && fail "$work/ro is writable by the test's user: the test would prove nothing"

echo "== training the read-only project without --checkpoint-dir"
as "$train" "$work/ro/p.strata" --epochs 1 --threads 1 >"$work/train.txt" 2>&1 || {
  cat "$work/train.txt"
  fail "training a project in a read-only folder failed"
}
cat "$work/train.txt"
data="$home/.local/share/Strata/Strata/runs"
line=$(grep '^checkpoints: ' "$work/train.txt") || fail "strata-train did not say where the checkpoints go"
[[ $line == "checkpoints: $data/"*" (the project's folder is not writable)" ]] ||
  fail "checkpoints not in the per-user folder $data, or no reason given: $line"
folder=${line#checkpoints: }
folder=${folder% (the project*}
[[ -s "$folder/best.safetensors" ]] || fail "no best.safetensors in $folder"
[[ ! -e "$work/ro/runs" ]] || fail "a runs folder appeared in the read-only folder"

echo "== exporting it: the checkpoint is found in the per-user folder"
as "$train" export "$work/ro/p.strata" --format onnx -o "$home/m.onnx" >"$work/export.txt" 2>&1 || {
  cat "$work/export.txt"
  fail "export of the read-only project failed"
}
cat "$work/export.txt"
grep -qF "using checkpoint $folder/" "$work/export.txt" || fail "export did not use the run's checkpoint in $folder"
[[ -s "$home/m.onnx" ]] || fail "no ONNX file written"

echo "== a relative checkpoint_dir in a read-only project"
if as "$train" "$work/ro2/p.strata" --epochs 1 --threads 1 >"$work/ck.txt" 2>&1; then
  cat "$work/ck.txt"
  fail "training with checkpoint_dir inside a read-only folder succeeded?"
fi
cat "$work/ck.txt"
grep -qF "cannot write checkpoints to $work/ro2/ck" "$work/ck.txt" || fail "the refusal does not name the folder"
grep -qF -- "--checkpoint-dir" "$work/ck.txt" || fail "the refusal does not suggest --checkpoint-dir"
as "$train" "$work/ro2/p.strata" --epochs 1 --threads 1 --checkpoint-dir "$home/ck" >"$work/ck2.txt" 2>&1 || {
  cat "$work/ck2.txt"
  fail "--checkpoint-dir did not train the read-only project"
}
[[ -s "$home/ck/best.safetensors" ]] || fail "no checkpoint in --checkpoint-dir"
echo "passed"
