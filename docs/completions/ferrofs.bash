_ferrofs() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="ferrofs"
                ;;
            ferrofs,cat)
                cmd="ferrofs__subcmd__cat"
                ;;
            ferrofs,completions)
                cmd="ferrofs__subcmd__completions"
                ;;
            ferrofs,convert)
                cmd="ferrofs__subcmd__convert"
                ;;
            ferrofs,diff)
                cmd="ferrofs__subcmd__diff"
                ;;
            ferrofs,digest)
                cmd="ferrofs__subcmd__digest"
                ;;
            ferrofs,dump)
                cmd="ferrofs__subcmd__dump"
                ;;
            ferrofs,export)
                cmd="ferrofs__subcmd__export"
                ;;
            ferrofs,extract)
                cmd="ferrofs__subcmd__extract"
                ;;
            ferrofs,fsck)
                cmd="ferrofs__subcmd__fsck"
                ;;
            ferrofs,help)
                cmd="ferrofs__subcmd__help"
                ;;
            ferrofs,ls)
                cmd="ferrofs__subcmd__ls"
                ;;
            ferrofs,manpages)
                cmd="ferrofs__subcmd__manpages"
                ;;
            ferrofs,mkcomposefs)
                cmd="ferrofs__subcmd__mkcomposefs"
                ;;
            ferrofs,mkfs)
                cmd="ferrofs__subcmd__mkfs"
                ;;
            ferrofs,mount)
                cmd="ferrofs__subcmd__mount"
                ;;
            ferrofs,push)
                cmd="ferrofs__subcmd__push"
                ;;
            ferrofs,verity)
                cmd="ferrofs__subcmd__verity"
                ;;
            ferrofs__subcmd__help,cat)
                cmd="ferrofs__subcmd__help__subcmd__cat"
                ;;
            ferrofs__subcmd__help,completions)
                cmd="ferrofs__subcmd__help__subcmd__completions"
                ;;
            ferrofs__subcmd__help,convert)
                cmd="ferrofs__subcmd__help__subcmd__convert"
                ;;
            ferrofs__subcmd__help,diff)
                cmd="ferrofs__subcmd__help__subcmd__diff"
                ;;
            ferrofs__subcmd__help,digest)
                cmd="ferrofs__subcmd__help__subcmd__digest"
                ;;
            ferrofs__subcmd__help,dump)
                cmd="ferrofs__subcmd__help__subcmd__dump"
                ;;
            ferrofs__subcmd__help,export)
                cmd="ferrofs__subcmd__help__subcmd__export"
                ;;
            ferrofs__subcmd__help,extract)
                cmd="ferrofs__subcmd__help__subcmd__extract"
                ;;
            ferrofs__subcmd__help,fsck)
                cmd="ferrofs__subcmd__help__subcmd__fsck"
                ;;
            ferrofs__subcmd__help,help)
                cmd="ferrofs__subcmd__help__subcmd__help"
                ;;
            ferrofs__subcmd__help,ls)
                cmd="ferrofs__subcmd__help__subcmd__ls"
                ;;
            ferrofs__subcmd__help,manpages)
                cmd="ferrofs__subcmd__help__subcmd__manpages"
                ;;
            ferrofs__subcmd__help,mkcomposefs)
                cmd="ferrofs__subcmd__help__subcmd__mkcomposefs"
                ;;
            ferrofs__subcmd__help,mkfs)
                cmd="ferrofs__subcmd__help__subcmd__mkfs"
                ;;
            ferrofs__subcmd__help,mount)
                cmd="ferrofs__subcmd__help__subcmd__mount"
                ;;
            ferrofs__subcmd__help,push)
                cmd="ferrofs__subcmd__help__subcmd__push"
                ;;
            ferrofs__subcmd__help,verity)
                cmd="ferrofs__subcmd__help__subcmd__verity"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        ferrofs)
            opts="-h -V --help --version mkfs mkcomposefs mount convert fsck extract ls export cat diff dump push verity digest completions manpages help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__cat)
            opts="-h --device --offset --cache-dir --cache-dir-size --no-hot-prefetch --http-timeout --http-speed-limit --http-speed-time --http-deadline --s3-endpoint --s3-region --s3-profile --s3-addressing --verity --verity-hash-file --verity-hash-offset --verity-no-superblock --verity-salt --verity-data-block-size --verity-hash-algorithm --verity-format --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --device)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --offset)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache-dir-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-speed-limit)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-speed-time)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-deadline)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-region)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-profile)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-addressing)
                    COMPREPLY=($(compgen -W "path virtual" -- "${cur}"))
                    return 0
                    ;;
                --verity)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-hash-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-hash-offset)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-salt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-data-block-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-hash-algorithm)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__completions)
            opts="-h --help bash elvish fish powershell zsh"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__convert)
            opts="-z -C -h --erofs --all-platforms --preset --mkfs-options --noinline-data --zstd-level --jobs --layer-cache --verity --json --platform --insecure-registry --authfile --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --erofs)
                    COMPREPLY=($(compgen -W "raw zstd" -- "${cur}"))
                    return 0
                    ;;
                --preset)
                    COMPREPLY=($(compgen -W "fast balanced dense" -- "${cur}"))
                    return 0
                    ;;
                -z)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -C)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mkfs-options)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --zstd-level)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --jobs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --layer-cache)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --platform)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --insecure-registry)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --authfile)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__diff)
            opts="-h --json --cache-dir --cache-dir-size --no-hot-prefetch --http-timeout --http-speed-limit --http-speed-time --http-deadline --s3-endpoint --s3-region --s3-profile --s3-addressing --verity-old --verity-new --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --cache-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache-dir-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-speed-limit)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-speed-time)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-deadline)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-region)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-profile)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-addressing)
                    COMPREPLY=($(compgen -W "path virtual" -- "${cur}"))
                    return 0
                    ;;
                --verity-old)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-new)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__digest)
            opts="-h --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__dump)
            opts="-h --device --offset --cache-dir --cache-dir-size --no-hot-prefetch --http-timeout --http-speed-limit --http-speed-time --http-deadline --s3-endpoint --s3-region --s3-profile --s3-addressing --verity --verity-hash-file --verity-hash-offset --verity-no-superblock --verity-salt --verity-data-block-size --verity-hash-algorithm --verity-format --path --nid --profile --readahead --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --device)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --offset)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache-dir-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-speed-limit)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-speed-time)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-deadline)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-region)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-profile)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-addressing)
                    COMPREPLY=($(compgen -W "path virtual" -- "${cur}"))
                    return 0
                    ;;
                --verity)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-hash-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-hash-offset)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-salt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-data-block-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-hash-algorithm)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --path)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --nid)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --profile)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --readahead)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__export)
            opts="-o -h --device --offset --cache-dir --cache-dir-size --no-hot-prefetch --http-timeout --http-speed-limit --http-speed-time --http-deadline --s3-endpoint --s3-region --s3-profile --s3-addressing --verity --verity-hash-file --verity-hash-offset --verity-no-superblock --verity-salt --verity-data-block-size --verity-hash-algorithm --verity-format --output --no-sparse --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --device)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --offset)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache-dir-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-speed-limit)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-speed-time)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-deadline)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-region)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-profile)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-addressing)
                    COMPREPLY=($(compgen -W "path virtual" -- "${cur}"))
                    return 0
                    ;;
                --verity)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-hash-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-hash-offset)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-salt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-data-block-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-hash-algorithm)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --output)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -o)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__extract)
            opts="-j -h --device --offset --cache-dir --cache-dir-size --no-hot-prefetch --http-timeout --http-speed-limit --http-speed-time --http-deadline --s3-endpoint --s3-region --s3-profile --s3-addressing --verity --verity-hash-file --verity-hash-offset --verity-no-superblock --verity-salt --verity-data-block-size --verity-hash-algorithm --verity-format --path --no-owners --owners --no-xattrs --xattrs --jobs --memory --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --device)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --offset)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache-dir-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-speed-limit)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-speed-time)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-deadline)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-region)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-profile)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-addressing)
                    COMPREPLY=($(compgen -W "path virtual" -- "${cur}"))
                    return 0
                    ;;
                --verity)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-hash-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-hash-offset)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-salt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-data-block-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-hash-algorithm)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --path)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --jobs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -j)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --memory)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__fsck)
            opts="-j -h --device --offset --cache-dir --cache-dir-size --no-hot-prefetch --http-timeout --http-speed-limit --http-speed-time --http-deadline --s3-endpoint --s3-region --s3-profile --s3-addressing --verity --verity-hash-file --verity-hash-offset --verity-no-superblock --verity-salt --verity-data-block-size --verity-hash-algorithm --verity-format --no-data --jobs --memory --json --remote-stats --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --device)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --offset)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache-dir-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-speed-limit)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-speed-time)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-deadline)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-region)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-profile)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-addressing)
                    COMPREPLY=($(compgen -W "path virtual" -- "${cur}"))
                    return 0
                    ;;
                --verity)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-hash-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-hash-offset)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-salt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-data-block-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-hash-algorithm)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --jobs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -j)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --memory)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__help)
            opts="mkfs mkcomposefs mount convert fsck extract ls export cat diff dump push verity digest completions manpages help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__help__subcmd__cat)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__help__subcmd__completions)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__help__subcmd__convert)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__help__subcmd__diff)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__help__subcmd__digest)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__help__subcmd__dump)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__help__subcmd__export)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__help__subcmd__extract)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__help__subcmd__fsck)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__help__subcmd__ls)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__help__subcmd__manpages)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__help__subcmd__mkcomposefs)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__help__subcmd__mkfs)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__help__subcmd__mount)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__help__subcmd__push)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__help__subcmd__verity)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__ls)
            opts="-l -R -d -i -L -n -a -A -h --device --offset --cache-dir --cache-dir-size --no-hot-prefetch --http-timeout --http-speed-limit --http-speed-time --http-deadline --s3-endpoint --s3-region --s3-profile --s3-addressing --verity --verity-hash-file --verity-hash-offset --verity-no-superblock --verity-salt --verity-data-block-size --verity-hash-algorithm --verity-format --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --device)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --offset)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache-dir-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-speed-limit)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-speed-time)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-deadline)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-region)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-profile)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-addressing)
                    COMPREPLY=($(compgen -W "path virtual" -- "${cur}"))
                    return 0
                    ;;
                --verity)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-hash-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-hash-offset)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-salt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-data-block-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-hash-algorithm)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__manpages)
            opts="-h --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__mkcomposefs)
            opts="-h --digest-store --use-epoch --skip-devices --skip-xattrs --user-xattrs --print-digest --print-digest-only --from-file --min-version --max-version --threads --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --digest-store)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --min-version)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-version)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --threads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__mkfs)
            opts="-b -T -U -L -x -m -E -z -C -j -h --clean --layer-images --platform --insecure-registry --authfile --tar --aufs --ovlfs-strip --sort --ungzip --unxz --mkfs-time --ignore-mtime --all-root --uid-offset --gid-offset --force-uid --force-gid --exclude-path --exclude-regex --xattr-prefix --zD --xattr-inode-digest --chunksize --MZ --preset --compress-hints --workers --mount-point --profile --profile-readahead --max-extent-bytes --hard-dereference --offset --file-contexts --fs-config-file --product-out --block-list-file --blobdev --root-xattr-isize --dsunit --quiet --json --timings --base --incremental --verity --verity-salt --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --clean)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --layer-images)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --platform)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --insecure-registry)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --authfile)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tar)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ovlfs-strip)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sort)
                    COMPREPLY=($(compgen -W "path none" -- "${cur}"))
                    return 0
                    ;;
                --ungzip)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --unxz)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -b)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -T)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -U)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -L)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --uid-offset)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gid-offset)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --force-uid)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --force-gid)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --exclude-path)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --exclude-regex)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -x)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --xattr-prefix)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -m)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --zD)
                    COMPREPLY=($(compgen -W "0 1" -- "${cur}"))
                    return 0
                    ;;
                --xattr-inode-digest)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --chunksize)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -E)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --MZ)
                    COMPREPLY=($(compgen -W "i d id di 0" -- "${cur}"))
                    return 0
                    ;;
                --preset)
                    COMPREPLY=($(compgen -W "fast balanced dense" -- "${cur}"))
                    return 0
                    ;;
                -z)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -C)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --compress-hints)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --workers)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -j)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mount-point)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --profile)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --profile-readahead)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-extent-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --offset)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --file-contexts)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --fs-config-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --product-out)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --block-list-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --blobdev)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --root-xattr-isize)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --dsunit)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --base)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --incremental)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-salt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__mount)
            opts="-f -o -h --offset --device --cache-dir --cache-dir-size --no-hot-prefetch --http-timeout --http-speed-limit --http-speed-time --http-deadline --s3-endpoint --s3-region --s3-profile --s3-addressing --verity --verity-hash-file --verity-hash-offset --verity-no-superblock --verity-salt --verity-data-block-size --verity-hash-algorithm --verity-format --foreground --threads --cache-size --no-prefetch --prefetch-size --trace --basedir --verify-objects --insecure-lazy --platform --insecure-registry --authfile --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --offset)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --device)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache-dir-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-speed-limit)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-speed-time)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http-deadline)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-region)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-profile)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-addressing)
                    COMPREPLY=($(compgen -W "path virtual" -- "${cur}"))
                    return 0
                    ;;
                --verity)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-hash-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-hash-offset)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-salt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-data-block-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-hash-algorithm)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verity-format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --threads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -o)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prefetch-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --trace)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --basedir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --platform)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --insecure-registry)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --authfile)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__push)
            opts="-h --part-size --parallel --unsigned-payload --json --unchecked-part-size --part-delay-ms --s3-endpoint --s3-region --s3-profile --s3-addressing --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --part-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --parallel)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --part-delay-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-region)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-profile)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --s3-addressing)
                    COMPREPLY=($(compgen -W "path virtual" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ferrofs__subcmd__verity)
            opts="-h --hash-file --salt --data-block-size --hash --format --offset --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --hash-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --salt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --data-block-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --hash)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --offset)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _ferrofs -o nosort -o bashdefault -o default ferrofs
else
    complete -F _ferrofs -o bashdefault -o default ferrofs
fi
