"""Unique, deterministic Chinese sentences with one [MASK], about 17 characters each.

Sentence ``i`` is a template with a two-character name in it (a surname and a given-name
character), so ``len(TEMPLATES) * len(SURNAMES) * len(GIVEN)`` sentences differ from each other
before the sequence repeats: a server's result cache never sees the same text twice in a run.

>>> sentence(0)
'小王明今天下午在超市买了很多[MASK]果。'
"""

from __future__ import annotations

# With the two-character name and [MASK] counted as one: 16 to 19 characters, 17 on average.
TEMPLATES: tuple[str, ...] = (
    "小{name}今天下午在超市买了很多[MASK]果。",
    "{name}说明天的天气应该会很晴[MASK]吧。",
    "我和{name}打算周末一起去公园散[MASK]。",
    "{name}每天早上起床后都要喝一杯热[MASK]奶。",
    "老师让{name}把今天的作业认真地[MASK]一遍。",
    "{name}的妈妈正在厨房里给大家做[MASK]饭。",
    "春节快要到了，{name}准备坐火车回[MASK]过年。",
    "{name}昨天晚上和朋友看了一部[MASK]影。",
    "外面下雨了，{name}出门却忘记带雨[MASK]。",
    "{name}上个星期在图书馆借了三本[MASK]书。",
    "这家饭店的菜，{name}觉得真的很好[MASK]。",
    "{name}每天都坐地铁去公司上[MASK]，很方便。",
    "{name}的手机没电了，得赶紧去充[MASK]。",
    "医生告诉{name}最近要多喝[MASK]多休息。",
    "{name}已经在北京学习中文三[MASK]多了。",
    "放学以后{name}经常和同学们去踢足[MASK]。",
    "{name}把自己的房间打扫得非常干[MASK]。",
    "这个周末{name}打算去爬[MASK]看看风景。",
    "{name}昨天在网上给自己买了一件新衣[MASK]。",
    "{name}每天晚上十点就准时上床睡[MASK]了。",
)
SURNAMES = (
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡"
    "余杜叶程苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯"
    "龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤"
)
GIVEN = (
    "明华强伟芳娜静丽敏军杰涛超勇艳磊洋刚平辉鹏宇飞鑫波斌浩凯健俊帆琳雪婷晨阳欣悦然思"
    "佳怡博文轩睿泽瑞航嘉宁安康乐心诚信志远德仁义礼智天海山川云风雨春秋冬梅兰竹菊松柏"
    "玉金银星月光彩霞虹亮"
)
CAPACITY = len(TEMPLATES) * len(SURNAMES) * len(GIVEN)


def sentence(index: int) -> str:
    """The ``index``-th sentence; distinct for every index below ``CAPACITY``."""
    index %= CAPACITY
    template = TEMPLATES[index % len(TEMPLATES)]
    rest = index // len(TEMPLATES)
    name = SURNAMES[rest % len(SURNAMES)] + GIVEN[(rest // len(SURNAMES)) % len(GIVEN)]
    return template.format(name=name)


def sentences(start: int, count: int) -> list[str]:
    return [sentence(start + offset) for offset in range(count)]
