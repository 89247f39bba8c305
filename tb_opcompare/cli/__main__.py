from tb_opcompare.cli.main import run

run()
