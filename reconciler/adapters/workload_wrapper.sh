#!/usr/bin/env bash
# tpu-reconciler workload wrapper. Uploaded by SFTP to ~/.tpu-reconciler/bin/ on every worker
# (reconciler/adapters/workload.py); runs one attempt of the user's program detached from SSH.
#
#   wrapper launch DIR WORKER WORKERS SLOT RUN_ID ATTEMPT   spec on stdin (framed, below)
#   wrapper probe  DIR                                      one line: state=... pid=... ...
#   wrapper serve                                           "probe DIR" lines in, answers out
#   wrapper stop   DIR GRACE_MS                             TERM the attempt, KILL after grace
#   wrapper logs   SLOTDIR RUN_ID|- ATTEMPT|0 LINES 0|1     framed output (see logs below)
#   wrapper hook   DIR KEY TIMEOUT_MS                       before_end: spec on stdin, once per KEY
#
# DIR is <base>/w<worker>/<slot>/<run_id>/<attempt>, SLOTDIR <base>/w<worker>/<slot>. In DIR:
#   launch.lock  flock serialising launch and stop of this attempt (held for milliseconds)
#   lock         flock held by the supervisor for the attempt's whole life ("alive")
#   started      "<epoch seconds> <boot id>": the attempt was launched (never twice)
#   pid          the program's pid = its process group (it runs under its own setsid)
#   exit         "code=N signal=NAME|none stopped=yes|no ended=<epoch>[ left=PID,...]", written
#                even when killed; "left=" names processes of the attempt still there at the
#                kill deadline (they survived SIGKILL, e.g. stuck in the kernel)
#   exit.reserve, pid.reserve  space set aside at launch: with the disk full, the record is
#                written into its reserve in place (no new blocks) and renamed over
#   stop         a stop was requested; a launch arriving after it starts nothing (it holds the
#                stop's kill deadline, epoch ms: the supervisor waits that long for the rest)
#   output.log   the program's stdout and stderr (and each before_end's, between banners)
#   hook-KEY     a before_end for the end KEY ran here: "started=..." then "code=N ended=..."
# After the program started, the supervisor removes this worker's older attempt directories of
# the slot beyond the newest "keep=N" (default 5; never one whose lock is held).
# SLOTDIR/current holds "<run_id>/<attempt>" of the latest launch on this worker, and
# SLOTDIR/launch.lock serialises launches of the slot's attempts on this worker, so "no other
# attempt holds the chips" is checked and the new one started in one step.
#
# A run id is "g<generation>-<identity>-<stamp>": two runs with the same first two parts run the
# same command of the same generation. When the latest launch here is such a run, not stopped,
# and the request is attempt 1 of another one, the launch starts nothing and answers
# "adopt <run_id>/<attempt>" (a controller that could not save which run it launched, restarted,
# finds it), and the probe of the new one answers "state=missing adopt=<run_id>/<attempt>".
#
# Every process of an attempt carries TPU_RECONCILER_ATTEMPT_DIR=DIR in its environment (the
# supervisor exports it; children inherit it), so one that left the process group (setsid, a
# double fork) is still found, by /proc/*/environ. When the program ends, by itself or by stop,
# the attempt ends with it: the rest are sent SIGTERM, then SIGKILL after the grace, and the
# supervisor lets go of its lock only once none is left or the kill deadline (KILL_WAIT_MS after
# SIGKILL) has passed. A new attempt of the slot starts only once that lock is free, and none
# while a process the latest attempt's exit record names as left is still there.
#
# The spec (NUL-terminated records "workdir=P", "env=NAME=VALUE", "grace=MS", "keep=N",
# "slices=N", "hosts=A,B,..." (every worker's address: TPU_WORKER_ID and TPU_WORKER_HOSTNAMES
# are set from it, for this worker's slice), "shell=COMMAND" or "arg=ARG"...) goes from stdin into a 0600 file that is unlinked as soon as
# the supervisor holds it open: secret values reach the program's environment only, never an
# argv or a log.
# It is framed: its last line is "end=<bytes> <sha256>" of the records before it. A spec cut
# off (a dropped session, a sender killed mid-send) or damaged is refused and removed, and
# nothing is started, so the sender's resend starts the program with all of its arguments.
set -u
umask 077

die() { # code message
    [ -n "${DRAIN:-}" ] && cat >/dev/null
    printf 'error %s\n' "$2"
    exit "$1"
}

held() { # is the flock on file $1 held by someone else?
    [ -e "$1" ] || return 1
    { flock -n -s 6; } 6<"$1" 2>/dev/null && return 1
    return 0
}

write_atomic() { # file text
    printf '%s\n' "$2" >"$1.tmp.$$" && mv -f -- "$1.tmp.$$" "$1"
}

RESERVE=256 # bytes set aside for a record: one block, written in place later
reserve() { # file: its reserve, written now while there is room
    printf '%*s\n' $((RESERVE - 1)) '' >"$1.reserve"
}

record() { # file text: atomically; with the disk full, in place in its reserve, then renamed
    if write_atomic "$1" "$2" 2>/dev/null; then
        rm -f -- "$1.tmp.$$" "$1.reserve"
        return 0
    fi
    rm -f -- "$1.tmp.$$"
    [ -e "$1.reserve" ] && [ ${#2} -lt "$RESERVE" ] || return 1
    # 1<> opens without truncating: the bytes go into the reserve's blocks; padded to its size
    printf '%-*s\n' $((RESERVE - 1)) "$2" 1<>"$1.reserve" && mv -f -- "$1.reserve" "$1"
}

key_of() { # run id -> $key ("g<generation>-<identity>", empty for ids without one)
    key=
    [[ $1 =~ ^(g[0-9]+-[0-9a-f]{8})-[0-9a-z]+$ ]] && key=${BASH_REMATCH[1]}
}

adoptable() { # slotdir run attempt -> $adopt: the latest launch here, if it is this run's twin
    local key mine prev=
    adopt=
    [ "$3" = 1 ] && [ -r "$1/current" ] || return 1
    read -r prev <"$1/current" 2>/dev/null || return 1
    key_of "$2"
    mine=$key
    key_of "${prev%/*}"
    [ -n "$mine" ] && [ "$key" = "$mine" ] && [ "${prev%/*}" != "$2" ] || return 1
    [ -e "$1/$prev/started" ] && [ ! -e "$1/$prev/stop" ] || return 1
    adopt=$prev
}

framed() { # file: whole, with its "end=<bytes> <sha256>" last line matching what precedes it
    local f=$1 trailer size len
    trailer=$(tail -c 200 -- "$f" | tr '\0' '\n' | tail -n 1) || return 1
    [[ $trailer =~ ^end=([0-9]+)\ ([0-9a-f]{64})$ ]] || return 1
    len=${BASH_REMATCH[1]}
    size=$(stat -c %s -- "$f") || return 1
    [ "$size" -eq $((len + ${#trailer} + 1)) ] || return 1
    [ "$(head -c "$len" -- "$f" | sha256sum)" = "${BASH_REMATCH[2]}  -" ]
}

leftover() { # attemptdir -> $left: what its exit record named as left and is still there
    local rec='' pids
    left=
    [ -r "$1/exit" ] && read -r rec <"$1/exit"
    [[ $rec == *" left="* ]] || return 1
    marked "$1"
    left=${pids# }
    left=${left// /,}
    [ -n "$left" ]
}

take_spec() { # file word: stdin into file, checked (framed), open on fd 7, file removed
    if ! cat >"$1"; then
        rm -f -- "$1" # a partial spec may hold a secret: it never outlives the failure
        die 74 "cannot write the spec (is the disk full?); nothing was $2"
    fi
    DRAIN=
    if ! framed "$1"; then
        rm -f -- "$1"
        die 65 "the spec arrived cut off or damaged; nothing was $2"
    fi
    exec 7<"$1"
    rm -f -- "$1"
}

spec_record() { # record: a spec's workdir=, env=, shell= or arg= into the caller's $wd, the
    # environment, $mode with $cmd or $argv (bash's dynamic scope); 1 for another record
    local kv
    case $1 in
    workdir=*) wd=${1#workdir=} ;;
    env=*)
        kv=${1#env=}
        # shellcheck disable=SC2163  # exports NAME=VALUE as given, no eval
        [[ ${kv%%=*} =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] && export -- "$kv"
        ;;
    shell=*) mode=shell cmd=${1#shell=} ;;
    arg=*) mode=argv argv+=("${1#arg=}") ;;
    *) return 1 ;;
    esac
    return 0
}

home_wd() { # the caller's $wd with a leading "~" expanded
    # shellcheck disable=SC2088  # a literal "~/..." from the spec, expanded here
    case $wd in
    "~") wd=$HOME ;;
    "~/"*) wd=$HOME/${wd#"~/"} ;;
    esac
}

launch() {
    local dir=$1 worker=$2 workers=$3 slot=$4 run=$5 attempt=$6
    local slotdir=${dir%/*/*} prev='' adopt='' left=''
    DRAIN=1 # until the spec is read, every way out reads it first
    mkdir -p -- "$dir" || die 74 "cannot create $dir"
    # The slot's lock first, then the attempt's (stop takes only the attempt's): from the check
    # below until the new supervisor holds its own lock, no other attempt of this slot can start.
    exec 5>"$slotdir/launch.lock"
    flock -w 30 5 || die 75 "launch lock of $slotdir busy"
    exec 9>"$dir/launch.lock"
    flock -w 30 9 || die 75 "launch lock of $dir busy"
    if [ -e "$dir/started" ] || [ -e "$dir/stop" ]; then
        cat >/dev/null # the spec, unread: let the sender finish writing it
        echo already
        exit 0
    fi
    if adoptable "$slotdir" "$run" "$attempt"; then
        cat >/dev/null
        echo "adopt $adopt"
        exit 0
    fi
    # One process holds the TPU: never start over a previous attempt still running here.
    if [ -r "$slotdir/current" ]; then
        read -r prev <"$slotdir/current"
        if [ "$prev" != "$run/$attempt" ] && held "$slotdir/$prev/lock"; then
            die 75 "attempt $prev is still running on this worker"
        fi
        if [ "$prev" != "$run/$attempt" ] && leftover "$slotdir/$prev"; then
            die 75 "processes of attempt $prev outlived its stop and are still here (pid $left)"
        fi
    fi
    exec 8>"$dir/lock"
    flock -w 10 8 || die 75 "lock of $dir busy"
    take_spec "$dir/spec" started
    : >>"$dir/output.log"
    if ! reserve "$dir/exit" || ! reserve "$dir/pid"; then
        rm -f -- "$dir/exit.reserve" "$dir/pid.reserve"
        die 74 "cannot set aside room for the exit record (is the disk full?); nothing was started"
    fi
    if ! write_atomic "$dir/started" "${EPOCHREALTIME:-$(date +%s)} $BOOT_ID" ||
        ! write_atomic "$slotdir/current" "$run/$attempt"; then
        rm -f -- "$dir/started" "$dir"/*.tmp.* "$slotdir"/current.tmp.* "$dir"/*.reserve
        die 74 "cannot write the launch records (is the disk full?); nothing was started"
    fi
    setsid bash "$0" supervise "$dir" "$worker" "$workers" "$slot" "$run" "$attempt" \
        <&7 7<&- 9>&- 5>&- >>"$dir/output.log" 2>&1 &
    echo launched
}

supervise() {
    local dir=$1 worker=$2 workers=$3 slot=$4 run=$5 attempt=$6
    local rec wd='' mode='' cmd='' pid code sig stopped slices=1 grace=60000 keep=5 left=''
    local hosts=''
    local -a argv=() all=()
    trap '' HUP
    # the launching SSH session's variables mean nothing to a detached program
    unset SSH_AUTH_SOCK SSH_CLIENT SSH_CONNECTION SSH_TTY SSH_ORIGINAL_COMMAND
    while IFS= read -r -d '' rec; do
        spec_record "$rec" && continue
        case $rec in
        grace=*) [[ ${rec#grace=} =~ ^[0-9]{1,9}$ ]] && grace=${rec#grace=} ;;
        keep=*) [[ ${rec#keep=} =~ ^[0-9]{1,6}$ ]] && keep=${rec#keep=} ;;
        slices=*) slices=${rec#slices=} ;;
        hosts=*) hosts=${rec#hosts=} ;;
        esac
    done # the frame's "end=" line has no NUL after it: read ends there and drops it
    home_wd
    exec </dev/null
    export TPU_RECONCILER_SLOT="$slot" TPU_RECONCILER_RUN_ID="$run"
    export TPU_RECONCILER_ATTEMPT="$attempt" TPU_RECONCILER_WORKER="$worker"
    if [[ $slices =~ ^[1-9][0-9]*$ ]] && ((slices > 1)); then # multislice: slices share workers
        local per=$((workers / slices))
        local slice=$((worker / (per > 0 ? per : 1)))
        export TPU_RECONCILER_SLICES="$slices" TPU_RECONCILER_SLICE="$slice"
        export MEGASCALE_SLICE_ID="$slice"
    fi
    export TPU_RECONCILER_WORKERS="$workers" TPU_RECONCILER_ATTEMPT_DIR="$dir"
    if [ -n "$hosts" ]; then # what JAX reads where the cloud does not say: this slice's hosts
        IFS=, read -r -a all <<<"$hosts"
        local n=1
        [[ $slices =~ ^[1-9][0-9]*$ ]] && n=$slices
        local per=$((${#all[@]} / n))
        ((per > 0)) || per=1
        local first=$((worker / per * per)) joined
        joined=$(IFS=,; echo "${all[*]:first:per}")
        export TPU_WORKER_ID=$((worker % per)) TPU_WORKER_HOSTNAMES="$joined"
    fi
    finish() { # code signal
        stopped=no
        [ -e "$dir/stop" ] && stopped=yes
        record "$dir/exit" \
            "code=$1 signal=$2 stopped=$stopped ended=$EPOCHREALTIME${left:+ left=${left:0:120}}"
        exit 0
    }
    if [ -n "$wd" ] && ! cd -- "$wd"; then
        echo "tpu-reconciler: cannot change to the workdir $wd" >&2
        finish 126 none
    fi
    case $mode in
    shell) (trap - INT QUIT; exec 8>&-; exec setsid bash -lc "$cmd") & ;;
    argv) (trap - INT QUIT; exec 8>&-; exec setsid -- "${argv[@]}") & ;;
    *)
        echo "tpu-reconciler: no command in the spec" >&2
        finish 2 none
        ;;
    esac
    pid=$!
    unset TPU_RECONCILER_ATTEMPT_DIR # the program's marker, not the supervisor's (nor its greps')
    record "$dir/pid" "$pid"
    prune "${dir%/*/*}" "$keep" "$run/$attempt"
    wait "$pid"
    code=$?
    sig=none
    if [ "$code" -gt 128 ]; then sig=$(kill -l $((code - 128)) 2>/dev/null || echo "$code"); fi
    # The program is over: so is the rest of its attempt. A stop ends them itself (one SIGTERM
    # each); otherwise they are ended here. Either way the lock is held until they are gone.
    if [ -e "$dir/stop" ]; then
        settle "$dir" "$pid" "$dir/stop"
    else
        end_attempt "$dir" "$pid" "$grace"
    fi
    finish "$code" "$sig"
}

probe() { # one line: state=alive|exited|missing pid=.. started=.. code=.. output=..[ left=..]
    # "left=PID,...": the exit record named processes that survived the kill deadline and they
    # are still there (marked with this attempt); the controller starts nothing until they go
    local dir=$1 started=- boot=- pid=- out=- code=- state rec adopt attempt=${1##*/} run
    local left=''
    if [ ! -e "$dir/started" ]; then
        run=${dir%/*}
        if adoptable "${run%/*}" "${run##*/}" "$attempt"; then
            echo "state=missing adopt=$adopt"
        else
            echo "state=missing"
        fi
        return 0
    fi
    read -r started boot <"$dir/started"
    [ -r "$dir/pid" ] && read -r pid <"$dir/pid"
    [ -e "$dir/output.log" ] && out=$(date -r "$dir/output.log" +%s.%N)
    if held "$dir/lock"; then
        state=alive
    elif [ -r "$dir/exit" ]; then
        state=exited
        read -r rec <"$dir/exit"
        code=${rec#code=}
        code=${code%% *}
        leftover "$dir" # some survived the kill deadline: are they still there?
    elif [ "$pid" != - ] && [ "$boot" = "$BOOT_ID" ] && kill -0 -- "-$pid" 2>/dev/null; then
        state=alive # the supervisor is gone but the program still runs
    else
        state=missing # vanished without a record (reboot, supervisor and program killed)
    fi
    echo "state=$state pid=$pid started=$started code=$code output=$out${left:+ left=${left:0:120}}"
}

serve() { # answer "probe DIR" lines until stdin ends (a pooled probe channel)
    local verb dir
    while IFS=' ' read -r verb dir; do
        case $verb in
        probe) probe "$dir" ;;
        *) echo "error unknown request" ;;
        esac
    done
}

now_ms() { # sets $now to epoch milliseconds (no subshell)
    now=${EPOCHREALTIME/./}
    now=$((now / 1000))
}

stop() {
    local dir=$1 grace=$2 pid='' left='' now
    mkdir -p -- "$dir" || die 74 "cannot create $dir"
    exec 9>"$dir/launch.lock"
    flock -w 30 9 || die 75 "launch lock of $dir busy"
    now_ms # the kill deadline, for the supervisor: it waits that long for the rest to go
    printf '%s\n' $((now + grace + KILL_WAIT_MS)) >"$dir/stop"
    exec 9>&-
    [ -r "$dir/pid" ] && read -r pid <"$dir/pid"
    if [ -z "$pid" ] && held "$dir/lock"; then # launched, program not started yet
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            sleep 0.1
            [ -r "$dir/pid" ] && read -r pid <"$dir/pid" && break
        done
    fi
    end_attempt "$dir" "$pid" "$grace"
    # the supervisor records the exit and lets go of the lock
    [ -e "$dir/lock" ] && { flock -w 30 -s 6 || die 75 "supervisor of $dir did not finish"; } 6<"$dir/lock"
    echo "stopped${left:+ left=$left}"
}

KILL_WAIT_MS=10000 # after SIGKILL, how long to wait for the attempt's processes to be gone

marked() { # dir -> $pids: the processes whose environment names this attempt
    local f
    pids=
    while read -r f; do
        f=${f#/proc/}
        pids+=" ${f%/environ}"
    done < <(grep -l -s -z -x -F -e "TPU_RECONCILER_ATTEMPT_DIR=$1" /proc/[0-9]*/environ)
}

members() { # dir pid -> $pids: the attempt's processes, and "-PGID" while its group lives
    marked "$1"
    if [ -n "$2" ] && kill -0 -- "-$2" 2>/dev/null; then pids+=" -$2"; fi
}

end_attempt() { # dir pid grace_ms -> every process of the attempt gone; $left: those that stayed
    local dir=$1 pid=$2 now deadline sig=TERM sent=' ' p
    left=
    now_ms
    deadline=$((now + $3))
    while members "$dir" "$pid"; [ -n "$pids" ]; do
        for p in $pids; do # SIGTERM once per process (a second one means "now" to many)
            if [ "$sig" = KILL ]; then
                kill -KILL -- "$p" 2>/dev/null
            elif [[ $sent != *" $p "* ]]; then
                kill -TERM -- "$p" 2>/dev/null
                sent+="$p "
            fi
        done
        now_ms
        if [ "$now" -ge "$deadline" ]; then
            if [ "$sig" = KILL ]; then
                left=${pids# }
                left=${left// /,}
                return 1
            fi
            sig=KILL
            deadline=$((now + KILL_WAIT_MS))
            continue
        fi
        sleep 0.1
    done
    return 0
}

settle() { # dir pid stopfile: wait (no signal) until the attempt has no process left, or the
    local now deadline='' # stop's kill deadline (in its file) is 5 s past
    left=
    read -r deadline <"$3" 2>/dev/null
    now_ms
    [[ $deadline =~ ^[0-9]+$ ]] || deadline=$((now + KILL_WAIT_MS))
    deadline=$((deadline + 5000))
    while members "$1" "$2"; [ -n "$pids" ]; do
        now_ms
        if [ "$now" -ge "$deadline" ]; then
            left=${pids# }
            left=${left// /,}
            return 1
        fi
        sleep 0.1
    done
}

prune() { # slotdir keep current: remove attempts beyond the newest KEEP (by launch time)
    local slotdir=$1 keep=$2 d t rest
    local -a all=()
    exec 5>"$slotdir/launch.lock"
    flock -w 30 5 || { exec 5>&-; return 0; } # a launch in progress: next time
    for d in "$slotdir"/*/*/started; do
        [ -e "$d" ] || continue
        read -r t rest <"$d" 2>/dev/null || continue
        [[ $t =~ ^[0-9]+(\.[0-9]+)?$ ]] || t=0
        d=${d%/started}
        all+=("$t ${d#"$slotdir"/}")
    done
    [ "${#all[@]}" -gt "$keep" ] || { exec 5>&-; return 0; }
    while read -r t d; do
        [ "$d" = "$3" ] && continue
        held "$slotdir/$d/lock" && continue
        rm -rf -- "${slotdir:?}/$d"
        rmdir -- "$slotdir/${d%/*}" 2>/dev/null
    done < <(printf '%s\n' "${all[@]}" | sort -g -r | tail -n +$((keep + 1)))
    exec 5>&-
}

# logs: frames "@ <attempt> <nbytes>\n" followed by exactly nbytes of the attempt's output,
# and "@ . 0\n" heartbeats while following (a closed channel then ends this loop by SIGPIPE).
emit() { # file from to attempt
    [ "$3" -gt "$2" ] || return 0
    printf '@ %s %s\n' "$4" $(($3 - $2))
    tail -c +$(($2 + 1)) -- "$1" | head -c $(($3 - $2))
}

size_of() { # file -> $size
    size=$(stat -c %s -- "$1" 2>/dev/null) || size=0
}

pointer() { # slotdir run -> $cur ("run/attempt" of the latest launch, or of run's latest)
    cur=
    if [ "$2" = - ]; then
        [ -r "$1/current" ] && read -r cur <"$1/current"
    else
        local a best=0
        for a in "$1/$2"/*; do
            a=${a##*/}
            [[ $a =~ ^[0-9]+$ ]] && [ "$a" -gt "$best" ] && best=$a
        done
        [ "$best" -gt 0 ] && cur="$2/$best"
    fi
}

logs() {
    local slotdir=$1 run=$2 attempt=$3 lines=$4 follow=$5 cur='' mine file size off beat=0
    if [ "$attempt" != 0 ]; then
        if [ "$run" = - ]; then
            pointer "$slotdir" -
            run=${cur%/*}
        fi
        cur="$run/$attempt"
    else
        pointer "$slotdir" "$run"
    fi
    while [ -z "$cur" ]; do # nothing launched yet on this worker
        [ "$follow" = 1 ] || exit 0
        echo "@ . 0"
        sleep 0.5
        pointer "$slotdir" "$run"
    done
    mine=$cur
    file="$slotdir/$mine/output.log"
    size_of "$file"
    off=$((size - $(head -c "$size" -- "$file" 2>/dev/null | tail -n "$lines" | wc -c)))
    emit "$file" "$off" "$size" "${mine##*/}"
    off=$size
    [ "$follow" = 1 ] || exit 0
    while :; do # follow this attempt, then every later launch on this worker
        sleep 0.2
        size_of "$file"
        emit "$file" "$off" "$size" "${mine##*/}"
        off=$size
        pointer "$slotdir" -
        if [ -n "$cur" ] && [ "$cur" != "$mine" ]; then
            size_of "$file"
            emit "$file" "$off" "$size" "${mine##*/}"
            mine=$cur
            file="$slotdir/$mine/output.log"
            off=0
            continue
        fi
        beat=$((beat + 1))
        if [ "$beat" -ge 5 ]; then
            echo "@ . 0"
            beat=0
        fi
    done
}

# hook: a workload's before_end, run once per attempt and end KEY while the attempt runs. The
# spec (framed like launch's: "workdir=", "env=", "shell=" or "arg=" records) names the command;
# it runs with the attempt's variables and TPU_RECONCILER_PID (the program's process group), not
# as part of the attempt (a stop does not end it), bounded by TIMEOUT_MS (then TERM, KILL 10 s
# later), its output appended to the attempt's output.log. hook-KEY records it first: a resend
# (the controller restarted, a worker's answer lost) answers "already ..." and runs nothing.
hook() {
    local dir=$1 key=$2 ms=$3 rec wd='' mode='' cmd='' code pid=- secs
    local -a argv=()
    DRAIN=1
    [ -e "$dir/started" ] || die 66 "attempt ${dir##*/} was never launched on this worker"
    exec 9>"$dir/hook.lock"
    flock -w 30 9 || die 75 "before_end lock of $dir busy"
    if [ -e "$dir/hook-$key" ]; then
        cat >/dev/null
        read -r rec <"$dir/hook-$key"
        echo "already $rec"
        exit 0
    fi
    take_spec "$dir/hook.spec" run
    write_atomic "$dir/hook-$key" "started=$EPOCHREALTIME" || die 74 "cannot record the run"
    while IFS= read -r -d '' rec <&7; do
        spec_record "$rec" || :
    done
    exec 7<&- 9>&-
    [ -r "$dir/pid" ] && read -r pid <"$dir/pid"
    export TPU_RECONCILER_PID="$pid"
    unset SSH_AUTH_SOCK SSH_CLIENT SSH_CONNECTION SSH_TTY SSH_ORIGINAL_COMMAND
    home_wd
    secs=$(((ms + 999) / 1000))
    {
        echo "--- tpu-reconciler before_end: ${TPU_RECONCILER_END:-end} at ${TPU_RECONCILER_END_TIME:-?} ---"
        if [ -n "$wd" ] && ! cd -- "$wd"; then
            echo "tpu-reconciler: cannot change to the workdir $wd"
            code=126
        else
            case $mode in
            shell) timeout -k 10 "$secs" bash -lc "$cmd" </dev/null ;;
            argv) timeout -k 10 "$secs" "${argv[@]}" </dev/null ;;
            *) echo "tpu-reconciler: no command in the spec" && false ;;
            esac
            code=$?
        fi
        echo "--- tpu-reconciler before_end exit $code ---"
    } >>"$dir/output.log" 2>&1
    record "$dir/hook-$key" "code=$code ended=$EPOCHREALTIME"
    echo "ran code=$code"
}

read -r BOOT_ID </proc/sys/kernel/random/boot_id 2>/dev/null || BOOT_ID=-
case ${1:-} in
serve) serve ;;
launch) [ $# -eq 7 ] || die 2 "usage"; shift; launch "$@" ;;
supervise) shift; supervise "$@" ;;
probe) [ $# -eq 2 ] || die 2 "usage"; probe "$2" ;;
stop) [ $# -eq 3 ] || die 2 "usage"; stop "$2" "$3" ;;
logs) [ $# -eq 6 ] || die 2 "usage"; shift; logs "$@" ;;
hook) [ $# -eq 4 ] || die 2 "usage"; shift; hook "$@" ;;
*) die 2 "usage: wrapper launch|probe|stop|logs|hook ..." ;;
esac
