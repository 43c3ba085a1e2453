#!/usr/bin/env bash
# Checks the .deb packages of tools/make-deb.sh as a user would meet them:
#   1. lintian over every package: any error fails; warnings are listed.
#   2. a fresh Debian 12 (bookworm) system in a chroot made with debootstrap (minbase), where
#        apt-get install ./strata_<version>_amd64.deb            (apt resolves the dependencies)
#      and then, as an ordinary user: strata-train --version (CUDA "not installed", no CUDA library needed),
#      --device cuda refused with that reason, a short training run of an installed example as it is (langid_text:
#      its data ships in the package; its run goes to ~/.local/share/Strata/Strata/runs, and export finds it),
#      the same with SentencePiece subwords (the shim in /usr/lib/strata), and the workbench under Xvfb:
#      strata --help, and `strata FILE.strata` opening a file (a screenshot of it); and, with the desktop's MIME
#      and desktop-entry databases installed, that a .strata file is application/x-strata-project and opens with
#      org.strata.Strata.desktop.
#
# Usage: tools/check-deb.sh [--debs DIR] [--keep]
#   --debs DIR  where the packages are (default: out/deb)
#   --keep      keep the chroot (in $WORK/root) to look around
# Needs root (chroot), debootstrap, lintian and zstd (tools/install-deps.sh ci). The system debootstrap makes is
# cached as a tarball under ~/.cache/strata/deb-check/ (and apt's downloaded packages beside it), so that a rerun
# starts from the same untouched system in seconds and downloads nothing it downloaded before.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEBS=$ROOT/out/deb
KEEP=0
while (($#)); do
  case "$1" in
    --debs) DEBS=$(realpath -m "$2"); shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "check-deb.sh: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
  esac
done
T0=$(date +%s)
say() { printf '[check-deb %4ss] %s\n' "$(($(date +%s) - T0))" "$*"; }
die() { printf 'check-deb.sh: %s\n' "$*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || die "needs root (debootstrap and chroot)"
for tool in debootstrap lintian zstd dpkg-deb; do
  command -v "$tool" >/dev/null || die "$tool not found (tools/install-deps.sh ci)"
done
shopt -s nullglob
main_debs=("$DEBS"/strata_*_amd64.deb)
all_debs=("$DEBS"/strata*.deb)
((${#main_debs[@]} == 1)) || die "expected one strata_*_amd64.deb in $DEBS, found ${#main_debs[@]} (tools/make-deb.sh)"
MAIN=${main_debs[0]}

# ---- 1. lintian ----------------------------------------------------------------------------------------------
say "lintian ${all_debs[*]##*/}"
lint=$(lintian --display-level ">=warning" "${all_debs[@]}" 2>&1 | grep -v 'running with root privileges' || true)
errors=$(grep -c '^E:' <<<"$lint" || true)
warnings=$(grep -c '^W:' <<<"$lint" || true)
if [[ -n "$lint" ]]; then printf '  %s\n' "${lint//$'\n'/$'\n'  }"; fi
((errors == 0)) || die "lintian: $errors error(s)"
say "lintian: no errors, $warnings warning(s)"

# ---- 2. a fresh Debian 12 ------------------------------------------------------------------------------------
SUITE=bookworm
MIRROR=${DEB_MIRROR:-http://deb.debian.org/debian}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/strata/deb-check
TARBALL=$CACHE/$SUITE-minbase.tar.zst
ARCHIVES=$CACHE/apt-archives  # apt's downloaded .debs, shared by the runs
WORK=$(mktemp -d /tmp/strata-deb-check.XXXXXX)
CH=$WORK/root
mounts=()
cleanup() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[i]}" 2>/dev/null || true; done
  if ((KEEP)); then
    echo "kept $CH" >&2
  elif grep -q " $WORK/" /proc/mounts; then
    # Never remove through a mount that is still there (/dev is bound into the chroot).
    echo "check-deb.sh: $WORK still has mounts; not removed" >&2
  else
    rm -rf --one-file-system "$WORK"
  fi
}
trap cleanup EXIT
mkdir -p "$CACHE" "$ARCHIVES/partial"
if [[ ! -s "$TARBALL" ]]; then
  say "debootstrap --variant=minbase $SUITE (once; cached as $TARBALL)"
  debootstrap --variant=minbase "$SUITE" "$WORK/boot" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
    die "debootstrap failed: $(tail -5 "$WORK/debootstrap.log")"
  rm -rf "$WORK/boot/var/cache/apt/archives/"*.deb "$WORK/boot/var/lib/apt/lists/"*_Packages
  tar -C "$WORK/boot" -cf - . | zstd -q -T0 -o "$TARBALL.part"
  mv "$TARBALL.part" "$TARBALL"
  rm -rf --one-file-system "${WORK:?}/boot"
fi
say "unpack a fresh $SUITE from $TARBALL"
mkdir -p "$CH"
zstd -dc "$TARBALL" | tar -C "$CH" -xf -
bind() { mkdir -p "$CH$2"; mount --bind "$1" "$CH$2"; mounts+=("$CH$2"); }
mount -t proc proc "$CH/proc"
mounts+=("$CH/proc")
bind /dev /dev
bind /dev/pts /dev/pts
bind "$ARCHIVES" /var/cache/apt/archives
cp /etc/resolv.conf "$CH/etc/resolv.conf"
printf 'deb %s %s main\ndeb %s %s-updates main\ndeb http://deb.debian.org/debian-security %s-security main\n' \
  "$MIRROR" "$SUITE" "$MIRROR" "$SUITE" "$SUITE" >"$CH/etc/apt/sources.list"
# Keep what apt downloads (the shared archive folder), as a rerun would otherwise fetch it again.
echo 'Binary::apt::APT::Keep-Downloaded-Packages "true";' >"$CH/etc/apt/apt.conf.d/01keep"
# No fsync per file: the system is thrown away after the check (halves dpkg's time on a busy disk).
echo force-unsafe-io >"$CH/etc/dpkg/dpkg.cfg.d/01unsafe-io"
in_root() { chroot "$CH" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }
in_user() { chroot --userspec=alice:alice "$CH" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/home/alice LANG=C.UTF-8 "$@"; }
in_root useradd -m -s /bin/bash alice
cp "$MAIN" "$CH/tmp/"
deb_name=$(basename "$MAIN")

say "apt-get update"
in_root apt-get update -qq >"$WORK/apt-update.log" 2>&1 || die "apt-get update failed: $(tail -5 "$WORK/apt-update.log")"
# The user's command (README): apt resolves the package's dependencies from Debian.
say "apt-get install ./$deb_name"
t=$(date +%s)
in_root sh -c "cd /tmp && DEBIAN_FRONTEND=noninteractive apt-get install -y -q ./$deb_name" >"$WORK/apt-install.log" 2>&1 ||
  die "apt-get install ./$deb_name failed: $(tail -15 "$WORK/apt-install.log")"
say "installed in $(($(date +%s) - t)) s: $(grep -m1 -E '^[0-9]+ upgraded, [0-9]+ newly installed' "$WORK/apt-install.log")"
in_root dpkg -s strata >/dev/null
if in_root sh -c 'ldconfig -p | grep -E "libcudart|libcublas|libcudnn"'; then die "the chroot has CUDA libraries: not a machine without CUDA"; fi

fail() { die "$1 (the chroot's output above)"; }
say "strata-train --version"
in_user strata-train --version | tee "$WORK/version.txt"
for want in '^strata-train ' '^commit ' '^build type ' '^backends cpu$' 'CUDA backend not installed'; do
  grep -q "$want" "$WORK/version.txt" || fail "strata-train --version lacks /$want/"
done

say "strata-train --device cuda is refused, naming the missing package"
if in_user strata-train /usr/share/strata/examples/langid_text.strata --device cuda --epochs 1 \
  --checkpoint-dir /home/alice/cuda >"$WORK/cuda.txt" 2>&1; then
  cat "$WORK/cuda.txt"
  fail "a CUDA run succeeded without the CUDA backend"
fi
cat "$WORK/cuda.txt"
grep -q 'CUDA backend not installed' "$WORK/cuda.txt" || fail "the refusal does not say the CUDA backend is not installed"

# The README's second command, as the user types it: the example's folder is read-only, so the run goes to the
# user's data folder, and export finds it there.
say "strata-train /usr/share/strata/examples/langid_text.strata --epochs 1"
in_user sh -c 'cd && strata-train /usr/share/strata/examples/langid_text.strata --epochs 1' 2>&1 |
  tee "$WORK/train.txt"
grep -qE 'epoch 1: .*val loss [0-9.]+ acc 0\.[5-9]' "$WORK/train.txt" || fail "the example did not train (validation accuracy <= 50%)"
runs=/home/alice/.local/share/Strata/Strata/runs
ck=$(sed -n "s#^checkpoints: \($runs/[^ ]*\) (the project's folder is not writable)\$#\1#p" "$WORK/train.txt")
[[ -n "$ck" ]] || fail "strata-train did not say that the checkpoints go to $runs (the project's folder is not writable)"
[[ -s "$CH$ck/best.safetensors" ]] || fail "no checkpoint in $ck"
say "strata-train export of the installed example finds its run"
in_user sh -c 'cd && strata-train export /usr/share/strata/examples/langid_text.strata --format onnx -o ~/langid.onnx' 2>&1 |
  tee "$WORK/export.txt"
grep -qF "using checkpoint $ck/" "$WORK/export.txt" || fail "export did not use the run's checkpoint in $ck"
[[ -s "$CH/home/alice/langid.onnx" ]] || fail "no ~/langid.onnx"

say "SentencePiece subwords (the shim in /usr/lib/strata)"
in_user sh -c 'sed -e "s/\"tokenizer\": \"char\"/\"tokenizer\": \"sentencepiece\"/" \
  -e "s#\"data/langid/#\"/usr/share/strata/examples/data/langid/#g" \
  /usr/share/strata/examples/langid_text.strata >~/langid_subwords.strata &&
  strata-train ~/langid_subwords.strata --epochs 1 --train-limit 3000 --checkpoint-dir ~/subwords' 2>&1 |
  tee "$WORK/sp.txt"
grep -q '(sentencepiece, ' "$WORK/sp.txt" || fail "the subwords project did not use SentencePiece"
grep -q '^finished after 1 epoch' "$WORK/sp.txt" || fail "training with SentencePiece subwords failed"

say "the workbench under Xvfb: strata --help, and strata FILE.strata"
in_root sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends xvfb xauth' \
  >"$WORK/apt-xvfb.log" 2>&1 || die "apt-get install xvfb failed: $(tail -5 "$WORK/apt-xvfb.log")"
in_user xvfb-run -a -s "-screen 0 1280x800x24" strata --help | tee "$WORK/gui-help.txt"
grep -q 'Strata: draw, train and export neural networks' "$WORK/gui-help.txt" || fail "strata --help under Xvfb failed"
in_user sh -c 'cd && xvfb-run -a -s "-screen 0 1280x800x24" strata /usr/share/strata/examples/langid_text.strata \
  --screenshot ~/opened.png --window-size 1280x800' | tee "$WORK/gui-open.txt"
[[ -s "$CH/home/alice/opened.png" ]] || fail "strata FILE.strata under Xvfb wrote no screenshot"
cp "$CH/home/alice/opened.png" "$DEBS/chroot-opened.png"

# What a desktop does on a double-click: the file's type from the shared MIME database, and the type's default
# application from the desktop entries (both databases made by the triggers of the packages that read them).
say "a double-click on a .strata file: its MIME type and the application that opens it"
in_root sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends shared-mime-info \
  desktop-file-utils libglib2.0-bin' >"$WORK/apt-mime.log" 2>&1 || die "apt-get install shared-mime-info failed: $(tail -5 "$WORK/apt-mime.log")"
in_user sh -c 'cp /usr/share/strata/examples/langid_text.strata ~/double-click.strata &&
  gio info -a standard::content-type ~/double-click.strata && gio mime application/x-strata-project' 2>&1 |
  tee "$WORK/mime.txt"
grep -q 'standard::content-type: application/x-strata-project' "$WORK/mime.txt" ||
  fail "a .strata file is not of type application/x-strata-project"
grep -q 'Default application for .application/x-strata-project.: org.strata.Strata.desktop' "$WORK/mime.txt" ||
  fail "the workbench does not open application/x-strata-project"

say "installed files: desktop entry, MIME type, icons, metainfo, man pages"
for f in /usr/share/applications/org.strata.Strata.desktop /usr/share/mime/packages/strata.xml \
  /usr/share/icons/hicolor/scalable/apps/org.strata.Strata.svg /usr/share/icons/hicolor/48x48/apps/org.strata.Strata.png \
  /usr/share/metainfo/org.strata.Strata.metainfo.xml /usr/share/man/man1/strata-train.1.gz \
  /usr/lib/strata/libstrata_sentencepiece.so; do
  [[ -s "$CH$f" ]] || fail "$f is not installed"
done
say "passed: $deb_name installs on a fresh $SUITE and trains an example (the workbench's screenshot: $DEBS/chroot-opened.png)"
