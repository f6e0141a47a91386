"""The demos of synchronous and asynchronous execution: one readable script each, run as
`python tools/demos/NAME.py` or `lowlevel demo NAME` (lowlevel/cli/demo.py imports the
script and calls its main()). A wheel carries them as lowlevel/_demos/. demo_kit.py is
what they share: options, the kernel, timing, and the report."""
