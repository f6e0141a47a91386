"""The emulated driver's occupancy calculator against the tests' own reading of
cuda_occupancy.h (helpers/occupancy_reference.py), over many (registers, shared memory,
block size) triples, for sm_80 and sm_90."""
import itertools

import pytest
from helpers import occupancy_reference as ref

from lowlevel.emu.driver import occupancy_rules as rules

SM = {80: rules.SM_80, 90: rules.SM_90}
REGISTERS = [1, 16, 24, 32, 40, 48, 63, 64, 65, 72, 96, 128, 129, 168, 200, 255]
STATIC = [0, 1, 1000, 4096, 12 * 1024, 40 * 1024, 48 * 1024]
BLOCKS = [1, 31, 32, 33, 64, 96, 128, 160, 192, 256, 288, 384, 512, 640, 768, 1000, 1024, 1025]


def _kernel(registers, static, max_dynamic=None, carveout=-1):
    max_dynamic = 48 * 1024 - static if max_dynamic is None else max_dynamic
    return (rules.KernelResources(registers, static, max_dynamic, 1024, carveout),
            {"numRegs": registers, "sharedSizeBytes": static, "maxDynamicSharedSizeBytes": max_dynamic,
             "carveout": carveout})


@pytest.mark.parametrize("cc", [80, 90])
def test_active_blocks_agree_on_every_triple(cc):
    checked = 0
    for registers, static, block in itertools.product(REGISTERS, STATIC, BLOCKS):
        mine, theirs = _kernel(registers, static)
        got = rules.max_active_blocks(SM[cc], mine, block)
        expected, limits = ref.max_active_blocks(cc, theirs, block)
        assert got.blocks == expected, (cc, registers, static, block, got.limits, limits)
        assert got.limits == limits
        checked += 1
    assert checked == len(REGISTERS) * len(STATIC) * len(BLOCKS)


@pytest.mark.parametrize("cc", [80, 90])
@pytest.mark.parametrize("carveout", [-1, 0, 25, 50, 100])
def test_dynamic_shared_memory_and_carveouts_agree(cc, carveout):
    optin = SM[cc].shared_per_block_optin
    for static, dynamic, block in itertools.product([0, 2048], [0, 1, 8 * 1024, 40 * 1024, 100 * 1024, optin - 2048,
                                                                optin], [64, 256, 1024]):
        for max_dynamic in (48 * 1024 - static, optin - static):
            mine, theirs = _kernel(32, static, max_dynamic, carveout)
            got = rules.max_active_blocks(SM[cc], mine, block, dynamic).blocks
            assert got == ref.max_active_blocks(cc, theirs, block, dynamic)[0], (static, dynamic, block, max_dynamic)


@pytest.mark.parametrize("cc", [80, 90])
def test_the_best_block_size_agrees(cc):
    for registers, static in itertools.product([16, 32, 64, 72, 128, 255], [0, 16 * 1024, 40 * 1024]):
        mine, theirs = _kernel(registers, static)
        for dynamic_for in (lambda b: 0, lambda b: 8 * b, lambda b: 4096 if b > 256 else 0):
            for limit in (0, 100, 512):
                assert rules.max_potential_block_size(SM[cc], mine, dynamic_for, limit) == \
                    ref.max_potential_block_size(cc, theirs, dynamic_for, limit), (registers, static, limit)


@pytest.mark.parametrize("cc", [80, 90])
def test_available_dynamic_shared_memory_agrees(cc):
    for registers, static, blocks, block in itertools.product([32, 128], [0, 10000], [1, 2, 3, 7, 16, 33], [64, 256]):
        for max_dynamic in (48 * 1024 - static, SM[cc].shared_per_block_optin - static):
            mine, theirs = _kernel(registers, static, max_dynamic)
            assert rules.available_dynamic_shared(SM[cc], mine, blocks, block) == \
                ref.available_dynamic_smem(cc, theirs, blocks, block), (registers, static, blocks, block)


def test_the_limiting_resource_is_named():
    occupancy = rules.max_active_blocks(rules.SM_90, _kernel(128, 0)[0], 256)
    assert occupancy.blocks == 2 and occupancy.limiting == ["registers"] and occupancy.warps == 16
