# Baseline discipline for every script that puts braid beside llama.cpp
# (sourced, not run). A comparison is only worth quoting when
#
#  1. the llama.cpp build uses every SIMD extension this CPU has: a build
#     without them (a generic package, a build for another machine) decodes
#     at a third of its speed here and makes every ratio flattering. AMX is
#     the one extension that may be missing, because some builds crash with
#     it and the fix is to turn off only AMX (GGML_AMX_INT8=OFF and friends);
#  2. both engines' weights stay resident: a kernel that reclaims cold page
#     cache (DAMON pageout, memory pressure) drops mmap'd weights mid-run and
#     whichever engine it hits loses, so the GGUF is measured from tmpfs;
#  3. both are measured at 1 thread as well as 2 (at 2 threads on a 2-core
#     machine the runtime's own threads compete with the compute threads).
#
# baseline_check and baseline_resident implement 1 and 2; the scripts loop
# over THREADS="1 2" for 3.

# baseline_features prints the feature line of the llama.cpp build in
# directory $1 (what ggml says it was compiled with, e.g. "AVX2 = 1 |
# AVX512 = 1 | ..."). llama-bench does not print it; llama-server and
# llama-cli do at log level 4, before they look at the model, so a path that
# does not exist is enough.
baseline_features() {
	local bin=$1 exe line
	for exe in llama-server llama-cli; do
		[ -x "$bin/$exe" ] || continue
		line=$(LD_LIBRARY_PATH="$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 60 "$bin/$exe" \
			-m /nonexistent-braid-baseline.gguf -lv 4 2>&1 </dev/null | grep -m1 'system_info' || true)
		if [ -n "$line" ]; then
			echo "${line#*system_info: }"
			return 0
		fi
	done
	echo "baseline: cannot read the feature line of the llama.cpp build in $bin (needs llama-server or llama-cli there)" >&2
	return 1
}

# baseline_required prints, one per line, the ggml feature names the build
# must show for this CPU, from the flags the kernel reports. AMX is left out
# on purpose (see above); baseline_check mentions it when the build lacks it.
baseline_required() {
	local flags
	case "$(uname -m)" in
	x86_64)
		flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
		local pair
		for pair in avx:AVX avx2:AVX2 fma:FMA f16c:F16C bmi2:BMI2 avx_vnni:AVX_VNNI \
			avx512f:AVX512 avx512vbmi:AVX512_VBMI avx512_vnni:AVX512_VNNI avx512_bf16:AVX512_BF16; do
			[[ $flags == *" ${pair%%:*} "* ]] && echo "${pair#*:}"
		done
		;;
	aarch64)
		flags=" $(grep -m1 '^Features' /proc/cpuinfo | cut -d: -f2) "
		local pair
		for pair in asimd:NEON asimddp:DOTPROD i8mm:MATMUL_INT8 sve:SVE; do
			[[ $flags == *" ${pair%%:*} "* ]] && echo "${pair#*:}"
		done
		;;
	esac
	return 0
}

# baseline_check refuses (returns 1, saying which) a llama.cpp build in $1
# that lacks an extension this CPU has, and prints the build's feature line
# on stderr so that it lands in the log beside the figures. Set
# BASELINE_ALLOW_PARTIAL=1 to measure such a build anyway (the line says so,
# and the figures must not be quoted as the reference).
baseline_check() {
	local bin=$1 line need missing=()
	line=$(baseline_features "$bin") || return 1
	echo "llama.cpp build ($bin): $line" >&2
	while read -r need; do
		[ -z "$need" ] && continue
		[[ $line == *"$need = 1"* ]] || missing+=("$need")
	done < <(baseline_required)
	if grep -qw amx_tile /proc/cpuinfo 2>/dev/null && [[ $line != *"AMX"* ]]; then
		echo "baseline: this CPU has AMX and the build does not use it (allowed: AMX is the one extension that may be turned off where it crashes)" >&2
	fi
	if [ ${#missing[@]} -gt 0 ]; then
		if [ "${BASELINE_ALLOW_PARTIAL:-0}" = 1 ]; then
			echo "baseline: WARNING the build lacks ${missing[*]}, which this CPU has; BASELINE_ALLOW_PARTIAL=1, so measuring anyway: do not quote these figures as the reference" >&2
			return 0
		fi
		echo "baseline: refusing the llama.cpp build in $bin: it lacks ${missing[*]}, which this CPU has; rebuild it for this machine (cmake -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON; where AMX crashes, turn off only AMX) or set BASELINE_ALLOW_PARTIAL=1" >&2
		return 1
	fi
	return 0
}

# baseline_resident prints a path of GGUF $1 on tmpfs: the file itself when
# it is there already, else a copy in ${BASELINE_TMPFS:-/dev/shm}/braid-bench
# (made once; reused while its size matches). It refuses when tmpfs lacks the
# room, unless BASELINE_ALLOW_DISK=1 (then it prints $1 and says why the
# figures may swing). BASELINE_KEEP_DISK=1 keeps $1 where it is without
# trying tmpfs: for a model that fits in memory once but not twice, whose
# callers hold it in anonymous memory instead (llama-bench -lm none, braid's
# repacked copies), so that a tmpfs copy beside them cannot run the machine
# out of memory.
baseline_resident() {
	local src=$1 dir="${BASELINE_TMPFS:-/dev/shm}/braid-bench" fs size free dst
	[ -f "$src" ] || { echo "baseline: $src: no such file" >&2; return 1; }
	fs=$(stat -f -c %T "$src" 2>/dev/null || echo unknown)
	if [ "$fs" = tmpfs ] || [ "$fs" = ramfs ]; then
		echo "$src"
		return 0
	fi
	if [ "${BASELINE_KEEP_DISK:-0}" = 1 ]; then
		echo "baseline: $src stays on $fs (BASELINE_KEEP_DISK=1): the engines must hold it in anonymous memory themselves (e.g. llama-bench -lm none)" >&2
		echo "$src"
		return 0
	fi
	size=$(stat -c %s "$src")
	dst="$dir/$(basename "$src")"
	if [ -f "$dst" ] && [ "$(stat -c %s "$dst")" = "$size" ]; then
		echo "$dst"
		return 0
	fi
	mkdir -p "$dir"
	free=$(df -B1 --output=avail "$dir" | tail -1 | tr -d ' ')
	if [ "$free" -lt $((size + (1 << 30))) ]; then
		if [ "${BASELINE_ALLOW_DISK:-0}" = 1 ]; then
			echo "baseline: WARNING $src stays on $fs ($size bytes do not fit in $dir with 1 GiB to spare); mmap'd weights may be paged out mid-run and either engine's figures may swing" >&2
			echo "$src"
			return 0
		fi
		echo "baseline: refusing $src on $fs: its $size bytes do not fit on tmpfs ($dir has $free free, 1 GiB spare wanted); free tmpfs or set BASELINE_ALLOW_DISK=1" >&2
		return 1
	fi
	echo "baseline: copying $src to $dst (tmpfs) so that neither engine's weights can be paged out" >&2
	cp "$src" "$dst.tmp" && mv "$dst.tmp" "$dst"
	echo "$dst"
}
