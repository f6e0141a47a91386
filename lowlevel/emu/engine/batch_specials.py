"""The special registers a batch of CTAs reads (%tid, %ctaid, %laneid ...): arrays over the
batch's lanes, or scalars where every lane reads the same value."""
import numpy as np

from ..isa.registry import HOOKS

WARP = 32


def batch_specials(launch, first: int, count: int) -> dict:
    """Values of the special registers for a batch (arrays, or scalars if uniform)."""
    u32 = np.uint32
    bx, by, bz = launch.block
    gx, gy, gz = launch.grid
    t = np.arange(launch.padded, dtype=u32)
    lane_t = np.tile(t, count) if count > 1 else t
    values = {
        "%ntid.x": u32(bx), "%ntid.y": u32(by), "%ntid.z": u32(bz),
        "%nctaid.x": u32(gx), "%nctaid.y": u32(gy), "%nctaid.z": u32(gz),
    }
    wanted = launch.ck.specials
    if "%tid.x" in wanted:
        values["%tid.x"] = lane_t % u32(bx) if bx > 1 else u32(0)
    if "%tid.y" in wanted:
        values["%tid.y"] = (lane_t // u32(bx)) % u32(by) if by > 1 else u32(0)
    if "%tid.z" in wanted:
        values["%tid.z"] = lane_t // u32(bx * by) if bz > 1 else u32(0)
    if "%laneid" in wanted:
        values["%laneid"] = lane_t % u32(WARP)
    if "%warpid" in wanted:
        values["%warpid"] = lane_t // u32(WARP)
    if any(s.startswith("%ctaid") for s in wanted):
        if launch.cluster:            # CTAs in cluster order (isa/cluster.py)
            values.update(HOOKS["cluster_ctaids"](launch, first, count))
        elif count == 1:
            lin = first
            values["%ctaid.x"] = u32(lin % gx)
            values["%ctaid.y"] = u32(lin // gx % gy)
            values["%ctaid.z"] = u32(lin // (gx * gy))
        else:
            lin = np.repeat(np.arange(first, first + count, dtype=np.uint64), launch.padded)
            values["%ctaid.x"] = (lin % np.uint64(gx)).astype(u32)
            values["%ctaid.y"] = (lin // np.uint64(gx) % np.uint64(gy)).astype(u32) \
                if gy > 1 else u32(0)
            values["%ctaid.z"] = (lin // np.uint64(gx * gy)).astype(u32) if gz > 1 else u32(0)
    return values
