# shellcheck shell=sh
# timing/lib/args.sh: the argument checks of Tessera's scripts (POSIX sh, so
# that sh and bash scripts both source it). A value is checked against what it
# must be before any use and is never evaluated: a bad one ends the script
# with a message naming the option (or argument) and the value, exit 2.
# The caller may set PROG, its name in the messages (default: $0's name).

# shown VALUE: VALUE for a message, control characters as '?' (no terminal codes)
shown() { printf '%s' "$1" | tr -c '[:print:]' '?'; }

# arg_error MESSAGE: a usage error, exit 2
arg_error() { printf '%s: error: %s\n' "${PROG:-${0##*/}}" "$*" >&2; exit 2; }

# need_value OPTION ARGC: OPTION, the current argument, has a value after it
# (call as: need_value "$1" $#)
need_value() { [ "$2" -ge 2 ] || arg_error "$1 needs a value"; }

# check_count OPTION VALUE MIN MAX: digits, no leading zero (but 0), MIN..MAX
check_count() {
    case $2 in
        0 | [1-9] | [1-9][0-9] | [1-9][0-9][0-9] | [1-9][0-9][0-9][0-9] | [1-9][0-9][0-9][0-9][0-9] | \
            [1-9][0-9][0-9][0-9][0-9][0-9] | [1-9][0-9][0-9][0-9][0-9][0-9][0-9])
            [ "$2" -ge "$3" ] && [ "$2" -le "$4" ] && return 0 ;;
    esac
    arg_error "$1 '$(shown "$2")': a whole number from $3 to $4"
}

# check_name OPTION VALUE: letters, digits, '.', '_', '-'; not '.', '..' or '-...'
check_name() {
    case $2 in
        '' | . | .. | -* | *[!A-Za-z0-9._-]*)
            arg_error "$1 '$(shown "$2")': a name of letters, digits, '.', '_' and '-'" ;;
    esac
}

# check_word OPTION VALUE WORD...: VALUE is one of the WORDs
check_word() {
    _cw_opt=$1 _cw_value=$2
    shift 2
    for _cw_word in "$@"; do
        [ "$_cw_value" = "$_cw_word" ] && return 0
    done
    arg_error "$_cw_opt '$(shown "$_cw_value")': one of $*"
}

# check_list OPTION VALUE CHECK [ARGS...]: VALUE is a comma-separated list of
# items, none empty, each passing CHECK OPTION ITEM ARGS... (check_count,
# check_name, check_word)
check_list() {
    _cl_opt=$1 _cl_value=$2 _cl_check=$3
    shift 3
    case $_cl_value in
        '' | ,* | *, | *,,*) arg_error "$_cl_opt '$(shown "$_cl_value")': a comma-separated list without empty items" ;;
    esac
    _cl_rest=$_cl_value,
    while [ -n "$_cl_rest" ]; do
        "$_cl_check" "$_cl_opt" "${_cl_rest%%,*}" "$@"
        _cl_rest=${_cl_rest#*,}
    done
}

# check_path OPTION VALUE: a path is data: any characters but it is not empty
# and has no newline (the scripts' messages and logs are line-based)
check_path() {
    case $2 in
        '' | *'
'*) arg_error "$1 '$(shown "$2")': a path, not empty and without a newline" ;;
    esac
}

# take_options HANDLER HELP HINT KNOWN [ARGS...]: the scripts' option loop,
# every option with a value, up to the first argument that is not an option
# (options_taken: how many arguments it took, for the caller's shift). -h or
# --help runs HELP and exits 0; an option not among KNOWN (a space-separated
# list; empty: any) is "unknown option ... HINT", exit 2; one without a value
# too (need_value); else HANDLER OPTION VALUE checks and keeps the value, or
# returns nonzero for an option it does not know (unknown too).
take_options() {
    _to_handler=$1 _to_help=$2 _to_hint=$3 _to_known=$4
    shift 4
    options_taken=0
    while [ $# -gt 0 ]; do
        case $1 in
            -h | --help) "$_to_help"; exit 0 ;;
            -*) ;;
            *) return 0 ;;
        esac
        case " $_to_known " in
            '  ' | *" $1 "*) need_value "$1" $# ;;
            *) arg_error "unknown option '$(shown "$1")' $_to_hint" ;;
        esac
        "$_to_handler" "$1" "$2" || arg_error "unknown option '$(shown "$1")' $_to_hint"
        shift 2
        options_taken=$((options_taken + 2))
    done
}

# take_all_options HANDLER HELP HINT KNOWN [ARGS...]: take_options for a
# script without arguments of its own (an argument left is an unknown option)
take_all_options() {
    _tao_hint=$3
    take_options "$@"
    shift $((options_taken + 4))
    [ $# -eq 0 ] || arg_error "unknown option '$(shown "$1")' $_tao_hint"
}

# take_options_and_csv HANDLER HELP USAGE KNOWN [ARGS...]: take_options for
# a script whose one argument is the CSV it writes (csv): a path that does
# not exist yet
take_options_and_csv() {
    _toc_usage=$3
    take_options "$1" "$2" "($3)" "$4" "${@:5}"
    shift $((options_taken + 4))
    [ $# -eq 1 ] || arg_error "$_toc_usage"
    csv=$1
    check_path OUT.csv "$csv"
    [ ! -e "$csv" ] || arg_error "$(shown "$csv") exists: name a new file"
}

# help_from_comments: the comment lines of the script from line 2 to its
# 'set -euo' line, its --help
help_from_comments() { sed -n '2,/^set -euo/p' "$0" | grep '^#'; }
