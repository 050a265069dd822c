"""`novella image build-guest`: the guest image real hypervisors boot.

    novella image build-guest --output DIR        write vmlinuz, initrd, root.qcow2 to DIR
    novella image build-guest [--config-file F]   build and upload them to the image
                                                  service nova.conf names (the root disk
                                                  image carries kernel_id and ramdisk_id)

Built from the installed Debian packages alone (README.md, Install);
docs/real-guests.md describes the guest.
"""
import os


def add_parser(sub):
    p = sub.add_parser("image", help="images for real guests",
                       description="The images real hypervisors boot (docs/real-guests.md).")
    cmds = p.add_subparsers(dest="image_command", required=True)
    build = cmds.add_parser("build-guest", help="build the small guest image from Debian "
                                                "packages (and upload it)",
                            description="Build the guest's kernel, initramfs and root disk "
                                        "from the installed Debian packages; write them to "
                                        "--output, or upload them to the image service "
                                        "nova.conf names (the root disk image names the "
                                        "other two as its kernel_id and ramdisk_id).")
    build.add_argument("--output", help="write the files to this directory, upload nothing")
    build.add_argument("--name", default=None, help="the root disk image's name "
                                                    "(default novella-guest)")
    build.add_argument("--config-file", action="append", default=[],
                       help="nova.conf naming the image service's database and data_dir")
    return p


def main(args):
    from novella.virt import guest_image
    if args.output:
        image = guest_image.build(args.output)
        for path in (image.kernel, image.ramdisk, image.root):
            print(f"{path}  {os.path.getsize(path)} bytes")
        print(f"command line: {image.command_line}")
        return 0
    from novella.conf import CONF, parse_args
    from novella.embedded import services_from_conf
    parse_args([], default_config_files=args.config_file)
    image_api = services_from_conf(CONF)[0]
    root, created = guest_image.ensure_guest_image(
        image_api, os.path.join(CONF.state_path, "guest-image"),
        name=args.name or guest_image.GUEST_IMAGE_NAME)
    print(f"{'uploaded' if created else 'already there'}: image {root['name']} {root['id']} "
          f"(kernel_id {root['properties']['kernel_id']}, "
          f"ramdisk_id {root['properties']['ramdisk_id']})")
    return 0
