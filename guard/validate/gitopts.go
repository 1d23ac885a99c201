package validate

import (
	"fmt"
	"strings"
)

// git's subcommands, each with the options the guard knows, as git's
// option parser reads them: an option a subcommand's table does not list
// is refused (args.option_not_allowed), whatever its name, short or long,
// clustered or abbreviated. The tables admit what reading, diffing and
// committing in a workspace needs, and nothing that runs a program
// (rebase -x/--exec, difftool, a pager, an external diff, a merge
// strategy git looks up on PATH, gpg), sets configuration, or writes
// outside the operands (--output). Values that name files are confined
// like operands.
//
// A table is a list of tokens: "-x" a flag, "--name" a long flag, a
// suffix "=" a value (in the next word or attached), "=?" a value that
// may only be attached ("-U3", "--abbrev=7"), "=f" a value that names a
// file, "=u" one that names a URL; "!-x why" and "!--name why" are refused
// with that reason (the table would refuse them anyway; the reason says
// why). "--no-NAME" is admitted where NAME is a flag or optional value of
// the table, as git's parser admits it.
var gitSubcommands = map[string]*progSpec{}

// Shared parts of the tables.
const (
	gitDigits = "-0 -1 -2 -3 -4 -5 -6 -7 -8 -9"
	gitRev    = gitDigits + ` -n= --max-count= --skip= --since= --after= --until= --before=
		--since-as-filter= --author= --committer= --grep= --grep-reflog= --all-match --invert-grep
		-i --regexp-ignore-case --basic-regexp -E --extended-regexp -F --fixed-strings -P --perl-regexp
		--merges --min-parents= --max-parents= --first-parent --exclude-first-parent-only --not --all
		--branches=? --tags=? --remotes=? --glob= --exclude= --exclude-hidden= --reflog
		--single-worktree --ignore-missing --cherry-pick --cherry-mark --left-only --right-only
		--cherry --left-right --boundary --simplify-by-decoration --full-history --dense --sparse
		--simplify-merges --ancestry-path=? --topo-order --date-order --author-date-order --reverse
		--walk=? --no-walk=? --do-walk --pretty=? --format= --abbrev-commit --oneline --encoding=
		--expand-tabs=? --notes=? --show-notes=? --standard-notes --relative-date --date= --parents
		--children --graph --show-linear-break=? --decorate=? --decorate-refs= --decorate-refs-exclude=
		--clear-decorations --source --use-mailmap --mailmap --log-size --follow -L= --full-diff
		--walk-reflogs -g --show-pulls --count --objects --objects-edge --header --timestamp
		!--show-signature runs gpg
		!--bisect changes the revisions from the bisection state`
	gitDiff = `-p -u --patch -s --no-patch -U=? --unified= --output-indicator-new= --output-indicator-old=
		--output-indicator-context= --raw --patch-with-raw -t --indent-heuristic --minimal --patience
		--histogram --anchored= --diff-algorithm= --stat=? --stat-width= --stat-name-width=
		--stat-count= --stat-graph-width= --compact-summary --numstat --shortstat -X=? --dirstat=?
		--cumulative --dirstat-by-file=? --summary --patch-with-stat -z --name-only --name-status
		--submodule=? --color=? --color-moved=? --color-moved-ws= --word-diff=? --word-diff-regex=
		--color-words=? --renames --rename-empty --check --ws-error-highlight= --full-index --binary
		--abbrev=? -B=? --break-rewrites=? -M=? --find-renames=? -C=? --find-copies=?
		--find-copies-harder -D --irreversible-delete -l= --diff-filter= -S= -G= --find-object=
		--pickaxe-all --pickaxe-regex -O=f -R --relative=? -a --text --ignore-cr-at-eol
		--ignore-space-at-eol -b --ignore-space-change -w --ignore-all-space --ignore-blank-lines
		-I= --ignore-matching-lines= --inter-hunk-context= -W --function-context --exit-code --quiet
		--ignore-submodules=? --src-prefix= --dst-prefix= --no-prefix --default-prefix --line-prefix=
		--ita-invisible-in-index --ita-visible-in-index -c --cc --combined-all-paths -m
		--diff-merges= --remerge-diff --dd --no-ext-diff --no-textconv
		!--output writes a file anywhere
		!--ext-diff runs the configured diff program
		!--textconv runs the configured conversion programs`
	gitFetch = `--all -a --append --atomic --depth= --deepen= --shallow-since= --shallow-exclude=
		--unshallow --update-shallow --negotiation-tip= --negotiate-only --dry-run --porcelain
		--write-fetch-head -f --force -k --keep --multiple --auto-maintenance --auto-gc
		--write-commit-graph --prefetch -p --prune -P --prune-tags -t --tags --refetch --refmap=
		--recurse-submodules=? -j= --jobs= --set-upstream --show-forced-updates -q --quiet -v
		--verbose --progress -o= --server-option= -4 --ipv4 -6 --ipv6 --filter=
		!--upload-pack runs a program on the remote side (and locally for local remotes)
		!--recurse-submodules-default reads submodule settings`
	gitMerge = `--commit --ff --ff-only --squash --stat -n --summary --log=? --signoff --verify
		--autostash --allow-unrelated-histories -X= --strategy-option= -q --quiet -v --verbose
		--progress --rerere-autoupdate --cleanup= --into-name= --overwrite-ignore --no-edit --no-gpg-sign
		!-s runs the merge strategy program git looks up
		!--strategy runs the merge strategy program git looks up
		!-S runs gpg
		!--gpg-sign runs gpg
		!-e runs an editor
		!--edit runs an editor`
	gitPathspecFile = "--pathspec-from-file=f --pathspec-file-nul"
)

// gitTables are the subcommands' tables.
var gitTables = map[string]string{
	"status": `-s --short -b --branch --show-stash --porcelain=? --long -v --verbose -u=?
		--untracked-files=? --ignore-submodules=? --ignored=? -z --column=? --ahead-behind
		--renames --find-renames=?`,
	"log":      gitRev + " " + gitDiff,
	"show":     gitRev + " " + gitDiff,
	"rev-list": gitRev + " --quiet --disk-usage=? --in-commit-order --no-object-names --object-names",
	"shortlog": gitRev + " -s --summary -e --email -c --committer --group= -w=?",
	"diff":     gitDiff + " --no-index --cached --staged --merge-base -0 -1 -2 -3 --base --ours --theirs",
	"branch": `-a --all -r --remotes -v --verbose -l --list -d -D --delete -m -M --move -c -C --copy
		--show-current --contains=? --merged=? --no-merged=? --sort= --format= --points-at= -t
		--track=? --set-upstream-to= -u= --unset-upstream -f --force --color=? -q --quiet
		--column=? -i --ignore-case --create-reflog --omit-empty --abbrev=? --recurse-submodules
		!--edit-description runs an editor`,
	"tag": `-l --list -a --annotate -m= --message= -F=f --file=f -d --delete -n=? --sort= --contains=?
		--merged=? --points-at= -f --force --format= --column=? -i --ignore-case --color=?
		--cleanup= --create-reflog --omit-empty --trailer=
		!-s runs gpg !--sign runs gpg !-u runs gpg !--local-user runs gpg !-v runs gpg !--verify runs gpg
		!-e runs an editor !--edit runs an editor`,
	"rev-parse": `--show-toplevel --abbrev-ref=? --short=? --verify -q --quiet --git-dir --absolute-git-dir
		--git-common-dir --is-inside-work-tree --is-inside-git-dir --is-bare-repository
		--is-shallow-repository --show-prefix --show-cdup --show-superproject-working-tree
		--symbolic --symbolic-full-name --all --branches=? --tags=? --remotes=? --glob= --exclude=
		--sq --sq-quote --default= --since= --after= --until= --before= --revs-only --no-revs
		--flags --no-flags --path-format= --show-object-format=? --show-ref-format --local-env-vars
		--not --disambiguate= --git-path= --shared-index-path --end-of-options
		!--resolve-git-dir reads a file anywhere
		!--parseopt reads option specifications`,
	"ls-files": `-c --cached -m --modified -o --others -d --deleted -i --ignored -s --stage -u --unmerged
		-k --killed -z -t -v -f --exclude-standard --directory --empty-directory
		--eol --full-name --recurse-submodules --error-unmatch --with-tree= --deduplicate --format=
		--abbrev=? --debug --sparse -x= --exclude= -X=f --exclude-from=f --exclude-per-directory=`,
	"blame": `-L= -l -t -s -e -w -M=? -C=? --porcelain --line-porcelain -p --incremental -c --root
		--show-stats -f --show-name -n --show-number --date= --since= --abbrev=? --ignore-rev=
		--ignore-revs-file=f --contents=f -S=f --reverse --first-parent --progress --score-debug
		--color-lines --color-by-age --minimal -b --encoding=`,
	"grep": `-n --line-number -i --ignore-case -w --word-regexp -v --invert-match -l -L
		--files-with-matches --name-only --files-without-match -c --count -e= -E -F -G -P
		--extended-regexp --fixed-strings --basic-regexp --perl-regexp -h -H --full-name --cached
		--untracked --no-index --exclude-standard --recurse-submodules -A= -B= -C= --context=
		--after-context= --before-context= -p --show-function -W --function-context -o
		--only-matching -q --quiet -z --null --and --or --not --all-match --max-depth= --heading
		--break --column -a --text -I --threads= -m= --max-count= -f=f --color=? --no-textconv
		-r --recursive
		!--textconv runs the configured conversion programs
		!-O runs a program
		!--open-files-in-pager runs a program`,
	"describe": `--tags --all --long --abbrev= --always --dirty=? --broken=? --match= --exclude=
		--contains --exact-match --candidates= --first-parent --debug`,
	"add": `-A --all -u --update -n --dry-run -v --verbose -f --force -N --intent-to-add --refresh
		--ignore-errors --ignore-missing --renormalize --chmod= --sparse --ignore-removal ` + gitPathspecFile + `
		!-i runs an interactive session !--interactive runs an interactive session
		!-p runs an interactive session !--patch runs an interactive session
		!-e runs an editor !--edit runs an editor`,
	"commit": `-m= --message= -a --all --amend --allow-empty --allow-empty-message -q --quiet
		-v --verbose -s --signoff --verify -n --author= --date= --no-edit -F=f --file=f -C=
		--reuse-message= --fixup= --squash= --reset-author --only -o -i --include --dry-run
		--short --porcelain --long -z --cleanup= --trailer= --status -u=? --untracked-files=?
		--no-gpg-sign --no-edit ` + gitPathspecFile + `
		!-S runs gpg !--gpg-sign runs gpg !-e runs an editor !--edit runs an editor
		!-c runs an editor !--reedit-message runs an editor
		!-t reads a template file !--template reads a template file
		!-p runs an interactive session !--patch runs an interactive session`,
	"init": `-q --quiet --bare -b= --initial-branch= --object-format= --ref-format= --shared=?
		!--template copies hooks from a directory
		!--separate-git-dir puts the repository anywhere`,
	"switch": `-c= -C= --create= --force-create= -d --detach --guess -f --force --discard-changes
		-m --merge --conflict= -q --quiet --progress -t --track=? --orphan= --ignore-other-worktrees
		--recurse-submodules`,
	"restore": `-s= --source= -W --worktree -S --staged -q --quiet --progress --ours --theirs -m
		--merge --conflict= --ignore-unmerged --ignore-skip-worktree-bits --overlay
		--recurse-submodules ` + gitPathspecFile + `
		!-p runs an interactive session !--patch runs an interactive session`,
	"checkout": `-b= -B= -f --force -q --quiet --progress -m --merge --detach -t --track=? --orphan=
		--ours --theirs -2 -3 --conflict= --ignore-skip-worktree-bits --ignore-other-worktrees
		--overwrite-ignore --recurse-submodules --overlay --guess ` + gitPathspecFile + `
		!-p runs an interactive session !--patch runs an interactive session`,
	"mv": "-f --force -k -n --dry-run -v --verbose --sparse",
	"rm": `-f --force -n --dry-run -r --cached --ignore-unmatch -q --quiet --sparse ` + gitPathspecFile,
	"stash": `-k --keep-index -u --include-untracked -a --all -q --quiet -m= --message= --index
		--staged --only-untracked --include-untracked ` + gitPathspecFile + " " + gitDiff + `
		!-p runs an interactive session !--patch runs an interactive session`,
	"reset": `--soft --mixed --hard --merge --keep -q --quiet -N --intent-to-add --refresh
		--recurse-submodules ` + gitPathspecFile + `
		!-p runs an interactive session !--patch runs an interactive session`,
	"cat-file": `-t -s -e -p --batch=? --batch-check=? --batch-command=? --batch-all-objects
		--follow-symlinks --unordered --buffer -z -Z --use-mailmap --mailmap --allow-unknown-type
		!--textconv runs the configured conversion programs
		!--filters runs the configured filter programs`,
	"ls-tree": `-d -r -t -l --long -z --name-only --name-status --object-only --full-name --full-tree
		--abbrev=? --format=`,
	"show-ref": `--head --heads --branches --tags -d --dereference -s --hash=? --verify --abbrev=? -q
		--quiet --exclude-existing=? --exists`,
	"remote": `-v --verbose -f -t= -m= --tags --mirror=? --push --add --delete --all -n --dry-run
		--auto --get-url`,
	"fetch":     gitFetch,
	"pull":      gitFetch + " " + gitMerge + " --rebase=? -r",
	"ls-remote": "--heads --branches --tags --refs -q --quiet --exit-code --get-url --sort= --symref -o= --server-option= !-u runs a program !--upload-pack runs a program",
	"push": `-u --set-upstream --all --branches --mirror --tags --follow-tags -f --force --force-with-lease=?
		--force-if-includes --delete -d -n --dry-run --porcelain -q --quiet -v --verbose --progress
		--prune --atomic -o= --push-option= --verify --recurse-submodules= -4 --ipv4 -6 --ipv6
		--thin --repo=
		!--receive-pack runs a program !--exec runs a program
		!--signed runs gpg`,
	"clone": `-b= --branch= --depth= --single-branch --tags --shallow-since= --shallow-exclude= -q
		--quiet -v --verbose --progress -n --checkout --bare --mirror -l --local --hardlinks
		--recurse-submodules=? --shallow-submodules --remote-submodules -j= --jobs= --sparse
		--filter= --also-filter-submodules -o= --origin= --reject-shallow --server-option=
		--ref-format= --reference=f --reference-if-able=f --dissociate
		!-u runs a program !--upload-pack runs a program
		!-c sets configuration !--config sets configuration
		!--template copies hooks from a directory
		!--separate-git-dir puts the repository anywhere
		!--bundle-uri fetches from a URL the guard does not judge`,
	"merge":       gitMerge + " -m= -F=f --file=f --abort --continue --quit",
	"rebase":      `--onto= --keep-base --continue --abort --quit --skip --root --autosquash --autostash --fork-point -q --quiet -v --verbose --stat -n --signoff --committer-date-is-author-date --ignore-date --reset-author-date --ignore-whitespace --whitespace= -f --force-rebase --ff -m --merge --apply --empty= --keep-empty --reapply-cherry-picks --allow-empty-message -C=? --rerere-autoupdate --verify --update-refs -X= --strategy-option= --rebase-merges=? -r !-x runs a program !--exec runs a program !-i runs the sequence editor !--interactive runs the sequence editor !--edit-todo runs an editor !-s runs the merge strategy program git looks up !--strategy runs the merge strategy program git looks up !-S runs gpg !--gpg-sign runs gpg`,
	"cherry-pick": "-x -n --no-commit -m= --mainline= -s --signoff --ff --allow-empty --allow-empty-message --keep-redundant-commits --empty= --continue --skip --quit --abort -X= --strategy-option= --rerere-autoupdate !-e runs an editor !--edit runs an editor !-S runs gpg !--gpg-sign runs gpg !--strategy runs the merge strategy program git looks up",
	"revert":      "--no-edit -n --no-commit -m= --mainline= -s --signoff --continue --skip --quit --abort -X= --strategy-option= --reference --rerere-autoupdate !-e runs an editor !--edit runs an editor !-S runs gpg !--gpg-sign runs gpg !--strategy runs the merge strategy program git looks up",
}

func init() {
	for name, table := range gitTables {
		sp, err := parseOptTable(table)
		if err != nil {
			panic(fmt.Sprintf("git %s: %v", name, err))
		}
		sp.operand = RoleFile
		sp.negatable = true
		gitSubcommands[name] = sp
	}
}

// parseOptTable reads a table of tokens (see gitSubcommands) into a spec.
func parseOptTable(table string) (*progSpec, error) {
	sp := &progSpec{short: map[byte]optSpec{}, long: map[string]optSpec{}}
	words := strings.Fields(table)
	for i := 0; i < len(words); i++ {
		w := words[i]
		var o optSpec
		if strings.HasPrefix(w, "!") {
			// "!-x why it is refused", the reason up to the next token.
			w = w[1:]
			j := i + 1
			for j < len(words) && !strings.HasPrefix(words[j], "-") && !strings.HasPrefix(words[j], "!") {
				j++
			}
			o = optSpec{deny: strings.Join(words[i+1:j], " ")}
			if o.deny == "" {
				return nil, fmt.Errorf("%s: no reason", w)
			}
			i = j - 1
		} else if name, kind, ok := strings.Cut(w, "="); ok {
			w = name
			switch kind {
			case "":
				o = plainVal
			case "?":
				o = optPlain
			case "f":
				o = fileVal
			case "u":
				o = urlVal
			default:
				return nil, fmt.Errorf("%s: unknown value kind %q", w, kind)
			}
		}
		switch {
		case strings.HasPrefix(w, "--") && len(w) > 2:
			sp.long[w[2:]] = o
		case strings.HasPrefix(w, "-") && len(w) == 2:
			sp.short[w[1]] = o
		default:
			return nil, fmt.Errorf("bad token %q", w)
		}
	}
	return sp, nil
}
