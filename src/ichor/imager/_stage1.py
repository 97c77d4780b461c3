"""Stage 1: the initramfs's ``/init``, a busybox script that mounts the layers and hands over.

It mounts proc, sys and devtmpfs, ``insmod``s the modules listed in ``/modules.load`` (loop,
squashfs, overlay and their dependencies, in order), loop-mounts ``/rootfs.sqsh`` and then every
``/layers/*.sqsh`` read-only in name order (the imager names them so: pydeps, ichor, each system
extension, the merged module index, ``/etc/extensions.yaml``, the rootfs overlay; ``_build.py``),
overlays them at ``/root`` (the last layer on top, no upper dir:
the root is read-only, as Talos's), moves ``/dev`` into it and ``switch_root``s to ``/sbin/init``
(machined). When the image carries install assets (``usr/install/amd64``, :mod:`._initramfs`) it
first moves them and its own files into a tmpfs, mounts the layers from there and moves that tmpfs
to ``/usr/install`` in the root, where the node's installer finds them. Like Talos's init it keeps no state and decides nothing: any failure prints what
failed on the console and powers off, so a broken image never loops.
"""

from __future__ import annotations

from ichor.imager._initramfs import ASSETS, KEPT

__all__ = ["INIT_SCRIPT", "KEEP", "MARKER"]

MARKER = "ichor-stage1: switching root"
"""Printed on the console just before ``switch_root`` (boot timing starts machined's share here)."""

KEEP = f"""from=""
if [ -f /{ASSETS}/vmlinuz ]; then
    # Keep the install assets and the files this initramfs boots from (imager/_initramfs.py).
    mkdir -p /keep
    mount -t tmpfs -o mode=0755 tmpfs /keep || fail "cannot mount a tmpfs for the install files"
    from=/keep/amd64/{KEPT}
    mkdir -p "$from/bin" "$from/layers"
    mv /{ASSETS}/vmlinuz /{ASSETS}/grub /keep/amd64/ || fail "cannot keep the install assets"
    cp /init /modules.load "$from/" && cp /bin/busybox "$from/bin/" && cp -a /lib "$from/" || fail "cannot keep stage 1's files"
    for layer in /rootfs.sqsh /layers/*.sqsh; do
        [ -f "$layer" ] || continue
        mv "$layer" "$from${{layer%/*}}/" || fail "cannot keep $layer"
    done
fi
"""
"""Stage 1's keeping of the install assets and its own files (``$from`` is where the layers are then)."""

INIT_SCRIPT = f"""#!/bin/busybox sh
# Ichor stage 1 (ichor.imager._stage1): mount the squashfs layers, overlay them, exec machined.
/bin/busybox mkdir -p /proc /sys /dev /root /layers /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
exec >/dev/console 2>&1
fail() {{
    echo "ichor-stage1: $*; powering off in 10 s"
    sleep 10
    poweroff -f
}}
echo "ichor-stage1: loading modules"
while read -r module; do
    insmod "/lib/modules/$module" || fail "insmod $module failed"
done < /modules.load
{KEEP}lower=""
n=0
for layer in "$from/rootfs.sqsh" "$from"/layers/*.sqsh; do
    [ -f "$layer" ] || continue
    mkdir -p "/layers/$n"
    mount -t squashfs -o ro,loop "$layer" "/layers/$n" || fail "cannot mount $layer"
    lower="/layers/$n${{lower:+:$lower}}"
    n=$((n + 1))
done
[ "$n" -ge 2 ] || fail "the image has $n layers, a read-only overlay needs at least 2"
mount -t overlay -o "ro,lowerdir=$lower" overlay /root || fail "cannot overlay $lower"
[ -x /root/sbin/init ] || fail "the root filesystem has no /sbin/init"
if [ -n "$from" ]; then
    mount --move /keep /root/usr/install || echo "ichor-stage1: the root has no /usr/install: no install assets"
fi
echo "{MARKER}"
mount --move /dev /root/dev
umount /proc /sys
exec switch_root /root /sbin/init
"""
