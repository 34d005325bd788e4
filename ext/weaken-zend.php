<?php
/*
 * Marks the extension's references to the Zend engine's per-flavour globals as
 * weak, so that a build loaded into the other flavour of PHP (an NTS build in a
 * ZTS PHP, or the reverse) is refused by PHP's own check, whose message names
 * both builds ("Module compiled with build ID=API20220829,NTS / PHP compiled
 * with build ID=API20220829,TS"), instead of failing inside dlopen() with
 * "undefined symbol: executor_globals", which names neither.
 *
 *   php ext/weaken-zend.php path/to/redis_lease.so
 *
 * An NTS PHP exports `executor_globals` and the like; a ZTS PHP exports
 * `executor_globals_offset` and `tsrm_get_ls_cache` instead. In a PHP of the
 * build's own flavour every such symbol is defined, so a weak reference binds
 * exactly as a strong one. In the other flavour they resolve to nothing, and
 * PHP compares build IDs (in get_module()'s answer, before any code of ours that
 * touches them runs) and refuses the module.
 *
 * Edits the file in place (ELF64 little-endian: x86_64, arm64; any other file
 * is left as it is); prints the symbols it marked. Running it twice changes
 * nothing more.
 */

const SHT_DYNSYM = 11;
const SHN_UNDEF = 0;
const STB_GLOBAL = 1;
const STB_WEAK = 2;

/** The symbols PHP itself defines in one flavour only (no other extension's). */
function flavour_symbol(string $name): bool
{
    return (bool) preg_match('/^(?:(?:executor|compiler|core|sapi|file)_globals(?:_offset|_id)?|tsrm_get_ls_cache)$/', $name);
}

$path = $argv[1] ?? '';
if ($path === '' || !is_file($path)) {
    fwrite(STDERR, "usage: php ext/weaken-zend.php path/to/redis_lease.so\n");
    exit(2);
}
$elf = file_get_contents($path);
if (substr($elf, 0, 4) !== "\x7fELF" || ord($elf[4]) !== 2 || ord($elf[5]) !== 1) {
    // (macOS, 32-bit or big-endian targets: the build stands as it is; only the message of a
    // wrong-flavour load is less clear.)
    echo "weaken-zend: $path is not a 64-bit little-endian ELF file: left as it is\n";
    exit(0);
}
$u16 = static fn(int $at): int => unpack('v', $elf, $at)[1];
$u32 = static fn(int $at): int => unpack('V', $elf, $at)[1];
$u64 = static fn(int $at): int => unpack('P', $elf, $at)[1];

$shoff = $u64(0x28);
$shentsize = $u16(0x3a);
$shnum = $u16(0x3c);
$marked = [];
for ($i = 0; $i < $shnum; $i++) {
    $sh = $shoff + $i * $shentsize;
    if ($u32($sh + 4) !== SHT_DYNSYM) {
        continue;
    }
    $offset = $u64($sh + 0x18);
    $size = $u64($sh + 0x20);
    $entsize = $u64($sh + 0x38) ?: 24;
    $strtab = $shoff + $u32($sh + 0x28) * $shentsize;
    $strOffset = $u64($strtab + 0x18);
    for ($sym = $offset; $sym < $offset + $size; $sym += $entsize) {
        $nameAt = $strOffset + $u32($sym);
        $name = substr($elf, $nameAt, strcspn($elf, "\0", $nameAt));
        $info = ord($elf[$sym + 4]);
        if ($u16($sym + 6) === SHN_UNDEF && $info >> 4 === STB_GLOBAL && flavour_symbol($name)) {
            $elf[$sym + 4] = chr((STB_WEAK << 4) | ($info & 0xf));
            $marked[] = $name;
        }
    }
}
if ($marked !== [] && file_put_contents($path, $elf) !== strlen($elf)) {
    fwrite(STDERR, "weaken-zend: cannot write $path\n");
    exit(1);
}
echo $marked === [] ? "weaken-zend: nothing to mark\n" : 'weaken-zend: weak: ' . implode(' ', $marked) . "\n";
