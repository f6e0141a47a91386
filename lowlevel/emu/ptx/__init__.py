"""The PTX front end: text -> a PtxModule of kernels and instructions; knows nothing of execution.

    lexer.py         tokens (comments blanked, ASCII only) and the token stream readers share
    parser.py        module statements and function bodies: `parse_ptx(text)`
    declarations.py  variables, initializers, parameters, registers and their { } scopes
    operands.py      one instruction: guard, opcode, modifiers, operands
    ir.py            what it produces: TYPES, operands, Instruction, Kernel, PtxModule
    registers.py     a kernel's declared registers, ranges kept whole
    functions.py     device function pointers: addresses of functions, .callprototype
    linker.py        several modules -> one: externs resolved, .file renumbered (cuLink*, nvJitLink)
    errors.py        PtxError, the one error of the front end and of decoding
"""
